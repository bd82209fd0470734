//! A finding's fix lines fitted to the terminal: commands wrapped with shell continuations so
//! that a copied line still runs, long address lists and rich-rule lists shortened to a count.

use std::fmt::Write as _;

use super::wrap;

/// Commands a fix line may hold after its `on NODE (tool): ` label: wrapped with a shell
/// continuation so that the copied lines still run.
const COMMANDS: &[&str] = &[
    "nft",
    "iptables",
    "ip6tables",
    "firewall-cmd",
    "kubectl",
    "systemctl",
    "sysctl",
    "ip",
    "ufw",
    "prober",
    "probe-pod",
];

/// A fix line fitted to `width`: never cut, never split inside a word. A command after its
/// label goes on its own lines, continued with ` \` so that it can be pasted as it is.
pub(super) fn fix_line(line: &str, width: usize) -> String {
    let line = line.trim_start();
    let full = format!("  fix: {line}");
    if full.chars().count() <= width {
        return full;
    }
    let split = line.match_indices(": ").find_map(|(i, _)| {
        let rest = &line[i + 2..];
        let word = rest.split_whitespace().next().unwrap_or("");
        COMMANDS.contains(&word).then(|| (&line[..=i], rest))
    });
    let Some((label, cmd)) = split else {
        return wrap(&full, width, 8);
    };
    let mut out = wrap(&format!("  fix: {label}"), width, 8);
    let indent = 8;
    let mut cur = " ".repeat(indent);
    let mut first = true;
    for word in cmd.split_whitespace() {
        // Room for the word plus the ` \` a continued line ends with.
        if !first && cur.chars().count() + 1 + word.chars().count() + 2 > width {
            out.push('\n');
            out.push_str(&cur);
            out.push_str(" \\");
            cur = " ".repeat(indent + 2);
            first = true;
        }
        if !first {
            cur.push(' ');
        }
        cur.push_str(word);
        first = false;
    }
    out.push('\n');
    out.push_str(&cur);
    out
}

/// Addresses (or CIDR blocks) of one list shown in the table before "and N more".
pub(super) const SHOWN_ADDRESSES: usize = 6;
/// firewalld rich rules of one fix line shown in the table.
pub(super) const SHOWN_RULES: usize = 3;

/// The end of the IPv4 address or CIDR block starting at byte `i` of `s`, if one does.
fn address_end(s: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'.') {
        return None;
    }
    let mut j = i;
    for part in 0..4 {
        let start = j;
        while j < s.len() && s[j].is_ascii_digit() && j - start < 3 {
            j += 1;
        }
        if j == start {
            return None;
        }
        if part < 3 {
            if s.get(j) != Some(&b'.') {
                return None;
            }
            j += 1;
        }
    }
    if s.get(j) == Some(&b'/') && s.get(j + 1).is_some_and(u8::is_ascii_digit) {
        j += 2;
        if s.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
    }
    (!s.get(j)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'.'))
    .then_some(j)
}

/// A fix line for the table: every list of more than `SHOWN_ADDRESSES` addresses (separated by
/// `,` or `, `) cut to its first ones and "... and N more", and a firewalld line's rich rules
/// cut to the first `SHOWN_RULES`. The JSON report keeps the whole line.
pub(super) fn cap_lists(line: &str) -> String {
    let line = cap_rich_rules(line);
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        let Some(mut end) = address_end(b, i) else {
            i += 1;
            continue;
        };
        // The run of addresses from here, and where the shown part ends.
        let (mut items, mut shown_end, mut sep) = (1usize, end, ", ");
        loop {
            let s = if line[end..].starts_with(", ") {
                ", "
            } else if line[end..].starts_with(',') {
                ","
            } else {
                break;
            };
            let Some(next) = address_end(b, end + s.len()) else {
                break;
            };
            items += 1;
            sep = s;
            if items <= SHOWN_ADDRESSES {
                shown_end = next;
            }
            end = next;
        }
        if items > SHOWN_ADDRESSES {
            out.push_str(&line[copied..shown_end]);
            let _ = write!(out, "{sep}... and {} more", items - SHOWN_ADDRESSES);
            copied = end;
        }
        i = end;
    }
    out.push_str(&line[copied..]);
    out
}

fn cap_rich_rules(line: &str) -> String {
    let parts: Vec<&str> = line.split(" && ").collect();
    let rules = parts
        .iter()
        .filter(|p| p.contains("--add-rich-rule"))
        .count();
    if rules <= SHOWN_RULES {
        return line.to_string();
    }
    let mut kept: Vec<String> = Vec::new();
    let mut seen = 0;
    for p in parts {
        if p.contains("--add-rich-rule") {
            seen += 1;
            if seen > SHOWN_RULES {
                if seen == SHOWN_RULES + 1 {
                    kept.push(format!("... and {} more rules", rules - SHOWN_RULES));
                }
                continue;
            }
        }
        kept.push(p.to_string());
    }
    kept.join(" && ")
}
