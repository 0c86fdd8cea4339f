//! An external builder's side of a task: it claims a pending request or
//! repair, and submits the fix.

use super::{Example, Fix, Refusal, Task, TaskSpec, TaskStatus, Tasks, budget, deploy_plan, spec};

impl Tasks {
    /// `POST /tasks/{id}/claim`: an external builder takes a pending request.
    pub fn claim(&self, id: &str, builder: &str) -> Result<Task, Refusal> {
        let current = self
            .get(id)
            .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))?;
        let claimable = matches!(current.kind.as_str(), spec::REQUEST | spec::REPAIR_TOOL);
        if current.status != TaskStatus::Pending || !claimable {
            return Err(Refusal::Conflict(format!(
                "task `{id}` cannot be claimed: only a pending request or repair (without a fix yet) can, and this is a {} task, {}",
                current.kind,
                current.status.as_str()
            )));
        }
        let builder = builder.to_owned();
        self.update(id, |t| {
            t.claimed_by = Some(builder.clone());
            (
                TaskStatus::Building,
                format!("claimed by {builder}: waiting for its source (POST /tasks/{{id}}/submit)"),
            )
        })
        .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))
    }

    /// `POST /tasks/{id}/submit`: the claiming builder's fix: a module
    /// (built like a `build_tool` task) or, for a repair of a service, its
    /// build context (deployed like a `service_deploy`, its manifest kept).
    pub fn submit_source(
        &self,
        id: &str,
        fix: Fix,
        examples: Option<Vec<Example>>,
        cost_usd: Option<f64>,
    ) -> Result<Task, Refusal> {
        let current = self
            .get(id)
            .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))?;
        if current.claimed_by.is_none()
            || current.status != TaskStatus::Building
            || current.spec.source.is_some()
            || current.spec.files.is_some()
        {
            return Err(Refusal::Conflict(format!(
                "task `{id}` takes no source now: claim a pending request first (POST /tasks/{{id}}/claim)"
            )));
        }
        if let Fix::Files(files) = &fix {
            if current.kind != spec::REPAIR_TOOL {
                return Err(Refusal::Conflict(format!(
                    "task `{id}` is a {}: its fix is a module (`language`, `source`); `files` fix a repaired service",
                    current.kind
                )));
            }
            let probe = TaskSpec {
                name: current.spec.name.clone(),
                files: Some(files.clone()),
                ..Default::default()
            };
            if let Err(e) = deploy_plan::context_files(&probe) {
                return Err(Refusal::Invalid(e));
            }
        }
        let verdict = {
            let entries = self.lock();
            let spent = self.spent_this_month(&entries) - current.spec.cost_usd.unwrap_or(0.0);
            self.budget.judge(cost_usd.or(current.spec.cost_usd), spent)
        };
        let (status, message) = match verdict {
            budget::Verdict::Refused(why) => return Err(Refusal::OverBudget(why)),
            budget::Verdict::NeedsApproval(why) => (TaskStatus::AwaitingApproval, why),
            budget::Verdict::Go => (
                TaskStatus::Building,
                "source submitted: queued for the build worker".to_owned(),
            ),
        };
        let task = self
            .update(id, |t| {
                match fix {
                    Fix::Source { language, source } => {
                        t.spec.language = Some(language);
                        t.spec.source = Some(source);
                    }
                    Fix::Files(files) => t.spec.files = Some(files),
                }
                if let Some(examples) = examples {
                    t.spec.examples = examples;
                }
                if cost_usd.is_some() {
                    t.spec.cost_usd = cost_usd;
                }
                (status, message)
            })
            .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))?;
        if status == TaskStatus::Building {
            let _ = self.queue.send(id.to_owned());
        }
        Ok(task)
    }
}
