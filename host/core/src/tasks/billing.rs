//! Seed 004's billing log (§11, `data/billing_log.json`'s `transactions`):
//! each entry a provider, an amount in USD and a description, kept in the
//! registry (every replica's, followed like tasks). Entries come from a
//! task's builder (its reported `cost_usd`, entered when the task completes:
//! a failed or cancelled build costs nothing) and from admins (`POST
//! /budget/transactions`: an API key topped up, a model's invoice). What
//! this month spent is derived from the log; the §11 rules apply to every
//! entry as to every task ([`super::budget::BudgetConfig::judge`]): over
//! the single-transaction limit or past the monthly one it is refused, over
//! the approval threshold it waits for an admin.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::registry::{Registry, Write};

/// A billing log entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    pub id: String,
    /// Unix ms it was entered.
    pub at: u64,
    /// Who was paid (`openai`), or `builder:<name>` for a task's cost.
    pub provider: String,
    pub amount_usd: f64,
    pub description: String,
    /// The task it paid for, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who entered it.
    pub by: String,
    /// `committed` (counts), or `awaiting_approval` (not yet).
    pub status: String,
}

pub const COMMITTED: &str = "committed";
pub const AWAITING: &str = "awaiting_approval";

/// The log, in memory as in the registry.
#[derive(Default)]
pub struct Billing {
    entries: Mutex<Vec<Transaction>>,
    registry: Option<Arc<Registry>>,
}

impl Billing {
    /// A log saved in `registry` ([`Billing::load`] what it holds).
    pub fn new(registry: Option<Arc<Registry>>) -> Billing {
        Billing {
            entries: Mutex::default(),
            registry,
        }
    }

    /// The entries the registry holds (`saved`, JSON, oldest first).
    pub fn load(&self, saved: &[String]) {
        for body in saved {
            self.followed(body);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Transaction>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the current UTC month's entries add up to (those awaiting
    /// approval are held: the month's limit was judged with them).
    pub fn spent_this_month(&self) -> f64 {
        let month = super::budget::month_of(super::now_ms());
        self.lock()
            .iter()
            .filter(|t| super::budget::month_of(t.at) == month)
            .map(|t| t.amount_usd)
            .sum::<f64>()
            + 0.0
    }

    /// Enter `t` (or its new state), saved in the registry.
    pub fn enter(&self, t: Transaction) {
        if let Some(registry) = &self.registry
            && let Ok(body) = serde_json::to_string(&t)
        {
            registry.write(Write::Billing(t.id.clone(), body));
        }
        self.put(t);
    }

    fn put(&self, t: Transaction) {
        let mut entries = self.lock();
        match entries.iter_mut().find(|e| e.id == t.id) {
            Some(e) => *e = t,
            None => entries.push(t),
        }
    }

    /// An entry another replica saved (JSON).
    pub fn followed(&self, body: &str) {
        match serde_json::from_str::<Transaction>(body) {
            Ok(t) => self.put(t),
            Err(_) => tracing::debug!("a billing entry does not parse; skipped"),
        }
    }

    pub fn get(&self, id: &str) -> Option<Transaction> {
        self.lock().iter().find(|t| t.id == id).cloned()
    }

    /// This month's entries and every one awaiting approval, oldest first.
    pub fn current(&self) -> Vec<Transaction> {
        let month = super::budget::month_of(super::now_ms());
        self.lock()
            .iter()
            .filter(|t| t.status == AWAITING || super::budget::month_of(t.at) == month)
            .cloned()
            .collect()
    }
}

impl super::Tasks {
    /// An admin's entry (`by`): refused over the single-transaction limit or
    /// past the monthly one, awaiting approval over the threshold, else
    /// committed.
    pub fn enter_transaction(
        &self,
        provider: String,
        amount_usd: f64,
        description: String,
        by: &str,
    ) -> Result<Transaction, super::Refusal> {
        if provider.trim().is_empty() {
            return Err(super::Refusal::Invalid(
                "`provider` names who was paid".into(),
            ));
        }
        if !amount_usd.is_finite() || amount_usd <= 0.0 {
            return Err(super::Refusal::Invalid(format!(
                "`amount_usd` must be a positive number, not {amount_usd}"
            )));
        }
        let spent = self.spent_this_month(&self.lock());
        let status = match self.budget.judge(Some(amount_usd), spent) {
            super::budget::Verdict::Refused(why) => return Err(super::Refusal::OverBudget(why)),
            super::budget::Verdict::NeedsApproval(_) => AWAITING,
            super::budget::Verdict::Go => COMMITTED,
        };
        let t = Transaction {
            id: new_id(),
            at: super::now_ms(),
            provider,
            amount_usd,
            description,
            task_id: None,
            by: by.to_owned(),
            status: status.into(),
        };
        self.billing.enter(t.clone());
        Ok(t)
    }

    /// An admin approves entry `id`, awaiting approval: committed (its
    /// amount was held within the month's limit since it was entered).
    pub fn approve_transaction(&self, id: &str) -> Result<Transaction, super::Refusal> {
        let mut t = self
            .billing
            .get(id)
            .ok_or_else(|| super::Refusal::NotFound(format!("no billing entry `{id}`")))?;
        if t.status != AWAITING {
            return Err(super::Refusal::Conflict(format!(
                "billing entry `{id}` is not awaiting approval ({})",
                t.status
            )));
        }
        t.status = COMMITTED.into();
        self.billing.enter(t.clone());
        Ok(t)
    }
}

/// A new entry's id.
pub fn new_id() -> String {
    format!("tx-{}", &uuid::Uuid::new_v4().simple().to_string()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(id: &str, at: u64, amount: f64, status: &str) -> Transaction {
        Transaction {
            id: id.into(),
            at,
            provider: "openai".into(),
            amount_usd: amount,
            description: "API Key 充值".into(),
            task_id: None,
            by: "admin".into(),
            status: status.into(),
        }
    }

    #[test]
    fn this_month_committed_entries_are_what_was_spent() {
        let now = super::super::now_ms();
        let b = Billing::default();
        b.enter(tx("a", now, 5.0, COMMITTED));
        b.enter(tx("b", now, 2.5, AWAITING));
        // Last year's does not count this month; one awaiting approval is held.
        b.enter(tx("c", now - 400 * 86_400_000, 100.0, COMMITTED));
        assert_eq!(b.spent_this_month(), 7.5);
        // Approved: the same entry, still counted once.
        b.enter(tx("b", now, 2.5, COMMITTED));
        assert_eq!(b.spent_this_month(), 7.5);
        assert!(Billing::default().spent_this_month().is_sign_positive());
        assert_eq!(
            b.current()
                .iter()
                .map(|t| t.id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        // Seed §11's own entry reads as written (with our fields beside).
        let body = serde_json::to_string(&tx("d", now, 5.0, COMMITTED)).unwrap();
        b.followed(&body);
        assert_eq!(b.get("d").unwrap().provider, "openai");
        b.followed("not json");
        assert_eq!(b.current().len(), 3);
    }
}
