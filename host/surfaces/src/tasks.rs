//! Tool requests and tasks (seed 004), admin only: `POST /tools/request`,
//! `GET /tasks`, `GET /tasks/{id}` (with its history), `GET
//! /tasks/{id}/status`, `DELETE /tasks/{id}`, `GET /tasks/{id}/events`
//! (SSE), and an external builder's `POST /tasks/{id}/claim` and
//! `/submit`; `GET /events` (SSE): seed 004's messages as they happen.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::JsonBody;
use super::error::ApiError;
use crate::state::AppState;
use toolhost_core::tasks::spec::REPAIR_TOOL;
use toolhost_core::tasks::{Example, Fix, Refusal, Task, TaskEvent, TaskSpec, repair};

/// Every route here is admin-only ([`super::auth::required`]).
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/tools/request", routing::post(request_tool))
        .route("/tasks", routing::get(list))
        .route("/tasks/{id}", routing::get(get).delete(cancel))
        .route("/tasks/{id}/status", routing::get(status))
        .route("/tasks/{id}/events", routing::get(events))
        .route("/tasks/{id}/claim", routing::post(claim))
        .route("/tasks/{id}/submit", routing::post(submit))
        .route("/tasks/{id}/approve", routing::post(approve))
        .route("/budget", routing::get(budget))
        .route("/budget/transactions", routing::post(enter_transaction))
        .route(
            "/budget/transactions/{id}/approve",
            routing::post(approve_transaction),
        )
        .route("/events", routing::get(messages))
        .route_layer(axum::middleware::from_fn_with_state(
            state.admin_token.clone(),
            super::auth::required,
        ))
}

pub fn refused(r: Refusal) -> ApiError {
    match r {
        Refusal::NotFound(m) => ApiError::not_found(m),
        Refusal::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
        Refusal::OverBudget(m) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "over_budget", m),
        Refusal::Invalid(m) => unprocessable(m),
    }
}

fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message)
}

/// Whether `spec` may become a task: valid, its callback allowed, its name
/// not being worked on, and free unless it asks to replace.
pub fn admit(state: &AppState, spec: &TaskSpec) -> Result<(), ApiError> {
    if let Some(problem) = spec
        .problem()
        .or_else(|| spec.gpu_problem(state.builders.any_gpu()))
    {
        return Err(unprocessable(problem));
    }
    if let Some(url) = &spec.callback_url
        && let Some(why) = state.callbacks.refusal(url)
    {
        return Err(unprocessable(format!("callback_url refused: {why}")));
    }
    if let Some(url) = &spec.repo_url
        && let Some(why) =
            toolhost_core::tasks::deploy_plan::git_refusal(url, &state.callbacks.git_allow)
    {
        return Err(unprocessable(format!("repo_url refused: {why}")));
    }
    if let Some(task) = state.tasks.in_flight_for(&spec.name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("task {task} is already working on `{}`", spec.name),
        ));
    }
    let taken = state
        .dispatcher
        .catalog()
        .toolkits()
        .iter()
        .any(|k| k.name == spec.name)
        || state.plugins.get(&spec.name).is_some();
    if taken && !spec.replace && spec.kind() != REPAIR_TOOL {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "a toolkit named `{}` exists: ask with \"replace\": true to replace it",
                spec.name
            ),
        ));
    }
    Ok(())
}

async fn request_tool(
    State(state): State<AppState>,
    JsonBody(mut spec): JsonBody<TaskSpec>,
) -> Result<Response, ApiError> {
    let notes = spec.read_seed_fields();
    let task = if spec.kind() == REPAIR_TOOL {
        open_repair(&state, spec)?
    } else {
        admit(&state, &spec)?;
        state.tasks.submit(spec).map_err(refused)?
    };
    tracing::info!(task = %task.task_id, kind = %task.kind, name = %task.spec.name, "tool requested");
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "task_id": task.task_id,
            "status": task.status,
            "name": task.spec.name,
            "type": task.kind,
            "message": task.events.last().map(|e| e.message.clone()),
            "notes": notes,
        })),
    )
        .into_response())
}

/// A repair task for `spec` (its tool resolved, its context attached).
pub fn open_repair(state: &AppState, mut spec: TaskSpec) -> Result<Task, ApiError> {
    let catalog = state.dispatcher.catalog();
    repair::resolve(&mut spec, catalog).map_err(refused)?;
    admit(state, &spec)?;
    state
        .tasks
        .open_repair(spec, catalog, state.plugins.dir(), &state.health)
        .map_err(refused)
}

async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let tasks: Vec<Value> = state.tasks.list().iter().map(|t| t.view()).collect();
    Ok(Json(json!({ "tasks": tasks })))
}

fn find(state: &AppState, id: &str) -> Result<toolhost_core::tasks::Task, ApiError> {
    state
        .tasks
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("no task `{id}`")))
}

async fn status(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(find(&state, &id)?.view()))
}

async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let task = find(&state, &id)?;
    let mut view = task.view();
    view["events"] = json!(task.events);
    Ok(Json(view))
}

async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let task = state.tasks.cancel(&id).map_err(refused)?;
    Ok(Json(task.view()))
}

/// The task's history, then its events as they happen, each an SSE `task`
/// event; the stream ends with the final one.
async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (task, live) = state
        .tasks
        .follow(&id)
        .ok_or_else(|| ApiError::not_found(format!("no task `{id}`")))?;
    // The past events, then live ones, up to and with the final one.
    let stream = futures::stream::unfold(
        (task.events.into_iter(), live, false),
        |(mut past, mut live, ended)| async move {
            if ended {
                return None;
            }
            let event = match past.next() {
                Some(e) => e,
                None => loop {
                    match live.recv().await {
                        Ok(e) => break e,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    }
                },
            };
            let ended = event.status.is_final();
            Some((event, (past, live, ended)))
        },
    )
    .map(|e: TaskEvent| {
        Ok::<_, Infallible>(
            Event::default()
                .event("task")
                .data(serde_json::to_string(&e).unwrap_or_default()),
        )
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// `GET /events`: seed 004's messages (`tool_ready`, `tool_error`,
/// `health_alert`) from now on, each an SSE event named by its type whose
/// data is the whole `{"type", "payload"}`. A subscriber too slow to keep up
/// is told how many it missed (a `lagged` event) and goes on.
async fn messages(State(state): State<AppState>) -> Response {
    let live = state.events.subscribe();
    let stream = futures::stream::unfold(live, |mut live| async move {
        let event = match live.recv().await {
            Ok(m) => Event::default()
                .event(m.kind.clone())
                .data(serde_json::to_string(&m).unwrap_or_default()),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => Event::default()
                .event("lagged")
                .data(json!({ "missed": n }).to_string()),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok::<_, Infallible>(event), live))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Claim {
    builder: String,
}

async fn claim(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(claim): JsonBody<Claim>,
) -> Result<Json<Value>, ApiError> {
    if claim.builder.trim().is_empty() {
        return Err(unprocessable("`builder` names who claims the task"));
    }
    let task = state.tasks.claim(&id, &claim.builder).map_err(refused)?;
    Ok(Json(task.view()))
}

/// A claimed task's fix: a module (`language`, `source`) or, for a
/// repaired service, its build context (`files`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub files: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub examples: Option<Vec<Example>>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// A submission, checked.
pub struct Submitted {
    pub fix: Fix,
    pub examples: Option<Vec<Example>>,
    pub cost_usd: Option<f64>,
}

impl Submission {
    /// The fix it gives, checked.
    pub fn fix(self) -> Result<Submitted, ApiError> {
        let fix = match (self.language, self.source, self.files) {
            (_, Some(_), Some(_)) => {
                return Err(unprocessable("give `source` or `files`, not both"));
            }
            (_, None, Some(files)) if !files.is_empty() => Fix::Files(files),
            (Some(language), Some(source), None) => {
                if !matches!(language.as_str(), "python" | "javascript") {
                    return Err(unprocessable(format!(
                        "unknown language `{language}`: use python or javascript"
                    )));
                }
                if source.is_empty() {
                    return Err(unprocessable("`source` is empty"));
                }
                Fix::Source { language, source }
            }
            (None, Some(_), None) => {
                return Err(unprocessable(
                    "`source` needs `language` (python or javascript)",
                ));
            }
            _ => {
                return Err(unprocessable(
                    "submit `language` and `source` (a module), or `files` (a repaired service's build context)",
                ));
            }
        };
        Ok(Submitted {
            fix,
            examples: self.examples,
            cost_usd: self.cost_usd,
        })
    }
}

async fn submit(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(s): JsonBody<Submission>,
) -> Result<Response, ApiError> {
    let s = s.fix()?;
    let task = state
        .tasks
        .submit_source(&id, s.fix, s.examples, s.cost_usd)
        .map_err(refused)?;
    Ok((StatusCode::ACCEPTED, Json(task.view())).into_response())
}

async fn approve(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let task = state.tasks.approve(&id).map_err(refused)?;
    Ok(Json(task.view()))
}

async fn budget(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(state.tasks.budget()))
}

/// Seed 004 §11's transaction, as an admin enters it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    provider: String,
    amount_usd: f64,
    #[serde(default)]
    description: String,
}

/// `POST /budget/transactions`: 201 committed, 202 awaiting approval, 422
/// over a limit (named).
async fn enter_transaction(
    State(state): State<AppState>,
    JsonBody(entry): JsonBody<Entry>,
) -> Result<Response, ApiError> {
    let args = json!({"provider": entry.provider, "amount_usd": entry.amount_usd, "description": entry.description});
    let entered =
        state
            .tasks
            .enter_transaction(entry.provider, entry.amount_usd, entry.description, "admin");
    let outcome = match &entered {
        Ok(t) => t.status.clone(),
        Err(e) => format!("{e:?}"),
    };
    state.audit("admin", "budget_transaction", args, &outcome);
    let t = entered.map_err(refused)?;
    let status = match t.status.as_str() {
        toolhost_core::tasks::billing::COMMITTED => StatusCode::CREATED,
        _ => StatusCode::ACCEPTED,
    };
    Ok((status, Json(json!(t))).into_response())
}

async fn approve_transaction(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let approved = state.tasks.approve_transaction(&id);
    let outcome = match &approved {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("{e:?}"),
    };
    state.audit("admin", "budget_approve", json!({"id": id}), &outcome);
    Ok(Json(json!(approved.map_err(refused)?)))
}
