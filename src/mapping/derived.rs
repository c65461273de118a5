//! Metrics the gateway derives from others: CPU time from proc `s` + `u`,
//! uptime from `tod` - `tos` (also used by the gateway's template fast path).

use std::fmt::Write as _;

use super::value::parse_integer;
use crate::catalog;

/// Values derived from others: CPU time from proc s+u, uptime from tod-tos.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Derived {
    usr_s: Option<u64>,
    usr_u: Option<u64>,
    sys_s: Option<u64>,
    sys_u: Option<u64>,
    tod: Option<i64>,
    tos: Option<i64>,
}

/// Which input of [`Derived`] a variable is, decided once per name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    None,
    UsrS,
    UsrU,
    SysS,
    SysU,
    Tod,
    Tos,
}

impl Role {
    /// The role of a variable by its catalog name.
    pub(crate) fn of(catalog_name: &str) -> Role {
        match catalog_name {
            "proc.usr.s" => Role::UsrS,
            "proc.usr.u" => Role::UsrU,
            "proc.sys.s" => Role::SysS,
            "proc.sys.u" => Role::SysU,
            "tod" => Role::Tod,
            "tos" => Role::Tos,
            _ => Role::None,
        }
    }
}

impl Derived {
    pub(crate) fn note(&mut self, role: Role, value: &str) {
        if role == Role::None {
            return;
        }
        let unsigned = || {
            parse_integer(value).ok().map(|v| {
                if v < 0 {
                    v as i32 as u32 as u64
                } else {
                    v as u64
                }
            })
        };
        match role {
            Role::UsrS => self.usr_s = unsigned(),
            Role::UsrU => self.usr_u = unsigned(),
            Role::SysS => self.sys_s = unsigned(),
            Role::SysU => self.sys_u = unsigned(),
            Role::Tod => self.tod = parse_integer(value).ok(),
            Role::Tos => self.tos = parse_integer(value).ok(),
            Role::None => {}
        }
    }

    /// (catalog name, value) of every derived variable these inputs give,
    /// in send order (at most four).
    pub(crate) fn computed(&self) -> impl Iterator<Item = (&'static str, u64)> {
        // Seconds past what milliseconds in a u64 hold are no CPU time:
        // left out, not wrapped.
        let ms = |s: Option<u64>, u: Option<u64>| s?.checked_mul(1000)?.checked_add(u? / 1000);
        let usr = ms(self.usr_s, self.usr_u);
        let sys = ms(self.sys_s, self.sys_u);
        let total = usr.zip(sys).and_then(|(u, s)| u.checked_add(s));
        let uptime = match (self.tod, self.tos) {
            (Some(tod), Some(tos)) if tod >= tos && tos > 0 => Some((tod - tos) as u64),
            _ => None,
        };
        [
            (catalog::DERIVED_CPU_USR, usr),
            (catalog::DERIVED_CPU_SYS, sys),
            (catalog::DERIVED_CPU_TOTAL, total),
            (catalog::DERIVED_UPTIME, uptime),
        ]
        .into_iter()
        .filter_map(|(name, v)| Some((name, v?)))
    }

    /// [`computed`](Self::computed) as text; `text` holds the formatted values.
    pub(super) fn values<'t>(&self, text: &'t mut String) -> Vec<(&'static str, &'t str)> {
        text.clear();
        let mut ends: Vec<(&'static str, usize, usize)> = Vec::new();
        for (name, v) in self.computed() {
            let start = text.len();
            let _ = write!(text, "{v}");
            ends.push((name, start, text.len()));
        }
        let text: &'t str = text;
        ends.into_iter().map(|(n, s, e)| (n, &text[s..e])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn computed(inputs: &[(Role, &str)]) -> Vec<(&'static str, u64)> {
        let mut d = Derived::default();
        for (role, value) in inputs {
            d.note(*role, value);
        }
        d.computed().collect()
    }

    #[test]
    fn cpu_time_past_what_u64_milliseconds_hold_is_left_out() {
        // 18446744073709552 s is past u64::MAX ms: no usr, hence no total.
        let c = computed(&[
            (Role::UsrS, "18446744073709552"),
            (Role::UsrU, "0"),
            (Role::SysS, "3"),
            (Role::SysU, "999999"),
        ]);
        assert_eq!(c, [(catalog::DERIVED_CPU_SYS, 3999)]);
        // Each fits, their sum does not.
        let c = computed(&[
            (Role::UsrS, "18446744073709551"),
            (Role::UsrU, "0"),
            (Role::SysS, "1000"),
            (Role::SysU, "0"),
        ]);
        assert_eq!(
            c,
            [
                (catalog::DERIVED_CPU_USR, 18_446_744_073_709_551_000),
                (catalog::DERIVED_CPU_SYS, 1_000_000),
            ]
        );
    }
}
