//! The one way outside text (node names, agents' messages, file names found on a node, a saved
//! report's strings, errors and notes quoting an input file) reaches a terminal: control
//! characters, bidi controls and line breaks are shown escaped, never obeyed, and names are cut
//! to a length a cell can show.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The most characters of one name (a node, a service, a file) a table shows.
pub const NAME_SHOWN: usize = 64;
/// The most characters of one message (a probe's detail, a finding's summary) a table shows.
pub const TEXT_SHOWN: usize = 2000;
/// The most characters of one line of stderr (an error with its causes, a warning).
pub const MESSAGE_SHOWN: usize = 8000;

/// Characters a terminal acts on instead of showing: C0 and C1 controls (escape sequences, line
/// breaks, tabs), the bidi embeddings, overrides and isolates that reorder what follows, the
/// zero-width and invisible formatting characters, and the Unicode line separators.
fn acted_on(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
        )
}

/// `s` with every character a terminal would act on written as `\u{..}`, and cut to `max`
/// characters (the cut said with `...(N more)`). Borrowed when nothing needed changing.
#[must_use]
pub fn shown(s: &str, max: usize) -> Cow<'_, str> {
    escaped(s, max, |_| false)
}

/// A whole message of ours that may quote input (an error and its causes, a warning, a note),
/// for stderr or stdout: as [`shown`], but its own line breaks and tabs kept (a parser's error
/// shows the lines around the position), cut at [`MESSAGE_SHOWN`].
#[must_use]
pub fn message(s: &str) -> Cow<'_, str> {
    escaped(s, MESSAGE_SHOWN, |c| matches!(c, '\n' | '\t'))
}

/// `s` with the characters a terminal acts on, but those `kept`, escaped; cut at `max`.
fn escaped(s: &str, max: usize, kept: fn(char) -> bool) -> Cow<'_, str> {
    let escape = |c: char| acted_on(c) && !kept(c);
    let mut chars = 0;
    let clean = s.chars().all(|c| {
        chars += 1;
        !escape(c)
    });
    if clean && chars <= max {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(max.saturating_mul(4)));
    let total = s.chars().count();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            let _ = write!(out, "...({} more)", total - max);
            break;
        }
        if escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A name, for a cell or a label.
#[must_use]
pub fn name(s: &str) -> Cow<'_, str> {
    shown(s, NAME_SHOWN)
}

/// A message, for a line that wraps.
#[must_use]
pub fn text(s: &str) -> Cow<'_, str> {
    shown(s, TEXT_SHOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_terminal_would_obey_is_shown_escaped() {
        assert!(matches!(name("n1"), Cow::Borrowed("n1")));
        assert_eq!(name("n1\x1b]0;owned\x07"), "n1\\u{1b}]0;owned\\u{7}");
        assert_eq!(text("a\nfake line\r"), "a\\u{a}fake line\\u{d}");
        assert_eq!(name("abc\u{202e}gpj.exe"), "abc\\u{202e}gpj.exe");
        assert_eq!(
            name("x\u{2066}y\u{2069}\u{9b}"),
            "x\\u{2066}y\\u{2069}\\u{9b}"
        );
        // Printable text of any script stays as it is.
        assert_eq!(text("nœud-é 節点"), "nœud-é 節点");
    }

    #[test]
    fn a_message_keeps_its_lines_and_shows_every_other_control() {
        assert!(matches!(message("a\n\tb"), Cow::Borrowed("a\n\tb")));
        assert_eq!(
            message("unknown variant `\x1b[2J\x1b]0;t\x07`\r\n"),
            "unknown variant `\\u{1b}[2J\\u{1b}]0;t\\u{7}`\\u{d}\n"
        );
        let long = message(&"x".repeat(MESSAGE_SHOWN + 5)).into_owned();
        assert!(long.ends_with("...(5 more)"), "{long:.20}");
    }

    #[test]
    fn long_names_are_cut_saying_how_much() {
        let long = "a".repeat(70_000);
        let s = name(&long);
        assert!(s.starts_with(&"a".repeat(NAME_SHOWN)), "{s}");
        assert!(
            s.ends_with(&format!("...({} more)", 70_000 - NAME_SHOWN)),
            "{s}"
        );
        assert_eq!(shown("abcdef", 3), "abc...(3 more)");
    }
}
