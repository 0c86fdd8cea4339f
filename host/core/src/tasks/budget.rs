//! Seed 004's budget for tool requests: a task may carry the cost its
//! builder reports (`cost_usd`). Over `single_tx_limit_usd`, or past
//! `monthly_limit_usd` with what this month's tasks already committed, it
//! is refused; over `require_approval_above_usd` it waits in
//! `awaiting_approval` until an admin approves it.

use serde::{Deserialize, Serialize};

/// `[budget]`: every limit optional (unset: no limit).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    pub monthly_limit_usd: Option<f64>,
    pub single_tx_limit_usd: Option<f64>,
    pub require_approval_above_usd: Option<f64>,
}

/// What the budget says of a cost.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Go,
    NeedsApproval(String),
    Refused(String),
}

impl BudgetConfig {
    /// The verdict on `cost` with `spent` already committed this month.
    pub fn judge(&self, cost: Option<f64>, spent: f64) -> Verdict {
        let Some(cost) = cost else {
            return Verdict::Go;
        };
        if !cost.is_finite() || cost < 0.0 {
            return Verdict::Refused(format!(
                "cost_usd must be a non-negative number, not {cost}"
            ));
        }
        if let Some(limit) = self.single_tx_limit_usd
            && cost > limit
        {
            return Verdict::Refused(format!(
                "cost ${cost:.2} is over the single-task limit of ${limit:.2} ([budget] single_tx_limit_usd)"
            ));
        }
        if let Some(limit) = self.monthly_limit_usd
            && spent + cost > limit
        {
            return Verdict::Refused(format!(
                "cost ${cost:.2} with ${spent:.2} already committed this month is over the monthly limit of ${limit:.2} ([budget] monthly_limit_usd)"
            ));
        }
        if let Some(threshold) = self.require_approval_above_usd
            && cost > threshold
        {
            return Verdict::NeedsApproval(format!(
                "cost ${cost:.2} is over ${threshold:.2} ([budget] require_approval_above_usd): waiting for an admin (POST /tasks/{{id}}/approve)"
            ));
        }
        Verdict::Go
    }
}

/// The UTC (year, month) of unix time `ms`.
pub fn month_of(ms: u64) -> (i64, u32) {
    let (year, month, _) = date_of(ms);
    (year, month)
}

/// The UTC (year, month, day) of unix time `ms`.
pub fn date_of(ms: u64) -> (i64, u32, u32) {
    // Howard Hinnant's days-to-civil algorithm.
    let z = (ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, (doy - (153 * mp + 2) / 5 + 1) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_thresholds_and_months() {
        let b = BudgetConfig {
            monthly_limit_usd: Some(100.0),
            single_tx_limit_usd: Some(50.0),
            require_approval_above_usd: Some(10.0),
        };
        assert_eq!(b.judge(None, 99.0), Verdict::Go);
        assert_eq!(b.judge(Some(5.0), 0.0), Verdict::Go);
        assert!(matches!(
            b.judge(Some(20.0), 0.0),
            Verdict::NeedsApproval(_)
        ));
        assert!(
            matches!(b.judge(Some(60.0), 0.0), Verdict::Refused(m) if m.contains("single-task"))
        );
        assert!(matches!(b.judge(Some(30.0), 80.0), Verdict::Refused(m) if m.contains("monthly")));
        assert!(matches!(b.judge(Some(-1.0), 0.0), Verdict::Refused(_)));
        assert_eq!(BudgetConfig::default().judge(Some(1e6), 1e9), Verdict::Go);
        assert_eq!(month_of(0), (1970, 1));
        // 2026-11-24T12:00:00Z and 2024-02-29T23:59:59Z.
        assert_eq!(month_of(1_795_521_600_000), (2026, 11));
        assert_eq!(month_of(1_709_251_199_000), (2024, 2));
    }
}
