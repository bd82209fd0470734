//! The HTTP `Date` header of a response head, and how far the server's clock is from ours: a
//! joining node whose clock is off fails its bootstrap token and certificates.

/// Unix seconds of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7), the only
/// form a server may send; `None` for anything else.
#[must_use]
pub fn parse(value: &str) -> Option<u64> {
    let (_weekday, rest) = value.trim().split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let (h, m, s): (u64, u64, u64) = (
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
    );
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, i64::try_from(day).ok()?)).ok()?;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 (Howard Hinnant's days-from-civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The server's clock minus ours (`now_ms`, when the head arrived), in milliseconds, from the
/// head's `Date` header. `Date` is to the second: its middle is taken, so the error is within
/// half a second either way.
#[must_use]
pub fn skew_ms(head: &[u8], now_ms: u64) -> Option<i64> {
    let text = std::str::from_utf8(head).ok()?;
    let date = text.split("\r\n").skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim().eq_ignore_ascii_case("date").then_some(value)
    })?;
    let server_ms = i64::try_from(parse(date)?.checked_mul(1000)?.checked_add(500)?).ok()?;
    Some(server_ms - i64::try_from(now_ms).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imf_fixdate_is_read_and_nothing_else() {
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse("Mon, 30 Nov 2026 18:00:00 GMT"), Some(1_796_061_600));
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), None);
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 CET"), None);
        assert_eq!(parse("Sun, 06 Foo 1994 08:49:37 GMT"), None);
    }

    #[test]
    fn the_skew_is_the_servers_date_minus_our_clock() {
        let head = b"HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n";
        // Our clock 90 s behind the server's.
        assert_eq!(skew_ms(head, (784_111_777 - 90) * 1000), Some(90_500));
        assert_eq!(skew_ms(head, 784_111_777 * 1000 + 500), Some(0));
        assert_eq!(skew_ms(b"HTTP/1.1 200 OK\r\n\r\n", 0), None);
    }
}
