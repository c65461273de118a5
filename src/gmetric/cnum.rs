//! What C's `strtol` and `strtod` accept, for gmetric's checks.
//!
//! gmetric 3.7.2 takes `-x`/`-d` with `strtol(arg, &end, 0)` and checks a
//! non-string value with `strtod(value, &end)`; in both an argument is valid
//! when `*end == '\0'`, i.e. the whole text was used, or nothing was (the
//! empty string). These functions return how much of the text C would use.

/// `strtol(s, &end, 0)`: (value, bytes used). Saturates at i64::MIN/MAX like
/// glibc's LONG on x86_64. No digits: (0, 0).
pub fn strtol(s: &str) -> (i64, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        negative = b[i] == b'-';
        i += 1;
    }
    let (base, mut j) = if b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        (16, i + 2)
    } else if b.get(i) == Some(&b'0') {
        (8, i)
    } else {
        (10, i)
    };
    let digits_start = j;
    let mut magnitude: u128 = 0;
    while let Some(d) = b.get(j).and_then(|c| (*c as char).to_digit(base)) {
        magnitude = (magnitude * u128::from(base) + u128::from(d)).min(1 << 64);
        j += 1;
    }
    if j == digits_start {
        return (0, 0);
    }
    let value = if negative {
        if magnitude > (1u128 << 63) {
            i64::MIN
        } else {
            (magnitude as i128).wrapping_neg() as i64
        }
    } else if magnitude > i64::MAX as u128 {
        i64::MAX
    } else {
        magnitude as i64
    };
    (value, j)
}

/// Bytes of `s` that `strtod` uses (0 if it converts nothing).
pub fn strtod_len(s: &str) -> usize {
    let b = s.as_bytes();
    let lower = s.to_ascii_lowercase();
    let l = lower.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let rest = &lower[i..];
    if rest.starts_with("infinity") {
        return i + 8;
    }
    if rest.starts_with("inf") {
        return i + 3;
    }
    if rest.starts_with("nan") {
        let mut j = i + 3;
        // nan(n-char-sequence)
        if b.get(j) == Some(&b'(') {
            let mut k = j + 1;
            while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_') {
                k += 1;
            }
            if b.get(k) == Some(&b')') {
                j = k + 1;
            }
        }
        return j;
    }
    let hex = rest.starts_with("0x") && {
        let after = &l[i + 2..];
        after.first().is_some_and(u8::is_ascii_hexdigit)
            || (after.first() == Some(&b'.') && after.get(1).is_some_and(u8::is_ascii_hexdigit))
    };
    let (digit, exp_char, mut j): (fn(&u8) -> bool, u8, usize) = if hex {
        (u8::is_ascii_hexdigit, b'p', i + 2)
    } else {
        (u8::is_ascii_digit, b'e', i)
    };
    let mut digits = 0;
    while l.get(j).is_some_and(digit) {
        j += 1;
        digits += 1;
    }
    if l.get(j) == Some(&b'.') {
        let mut k = j + 1;
        let mut frac = 0;
        while l.get(k).is_some_and(digit) {
            k += 1;
            frac += 1;
        }
        if digits + frac > 0 {
            j = k;
            digits += frac;
        }
    }
    if digits == 0 {
        return 0;
    }
    if l.get(j) == Some(&exp_char) {
        let mut k = j + 1;
        if matches!(l.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let start = k;
        while l.get(k).is_some_and(u8::is_ascii_digit) {
            k += 1;
        }
        if k > start {
            j = k;
        }
    }
    j
}

/// C's isspace in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (text, accepted as a whole by strtol, value) — measured on gmetric 3.7.2's -x.
    #[test]
    fn strtol_like_c() {
        let whole = |s: &str| {
            let (v, n) = strtol(s);
            (n == s.len(), v)
        };
        assert_eq!(whole("60"), (true, 60));
        assert_eq!(whole(""), (true, 0));
        assert_eq!(whole(" 5"), (true, 5));
        assert_eq!(whole("+7"), (true, 7));
        assert_eq!(whole("-1"), (true, -1));
        assert_eq!(whole("0x10"), (true, 16));
        assert_eq!(whole("-0x10"), (true, -16));
        assert_eq!(whole("010"), (true, 8));
        assert_eq!(whole("99999999999999999999"), (true, i64::MAX));
        assert_eq!(whole("-99999999999999999999"), (true, i64::MIN));
        for bad in ["5 ", "1.5", "1e3", "0b1", "abc", " ", "+", "-", "08", "0x"] {
            assert!(!whole(bad).0, "{bad:?} accepted");
        }
        assert_eq!(strtol("0x"), (0, 1));
    }

    #[test]
    fn strtod_like_c() {
        for ok in [
            "",
            "1",
            "1e10",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "Infinity",
            "0x1F",
            "0x1.8p3",
            "-5",
            "+3",
            "1.5",
            " 5",
            ".5",
            "5.",
            "99999999999999999999",
            "nan(abc)",
        ] {
            assert_eq!(strtod_len(ok), ok.len(), "{ok:?} rejected");
        }
        for bad in [
            "5 ", "5abc", "1,5", ".", "-", "0x", "1e", "a b  c", "été", "a\nb", " ",
        ] {
            assert_ne!(strtod_len(bad), bad.len(), "{bad:?} accepted");
        }
    }
}
