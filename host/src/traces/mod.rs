//! `[telemetry]`: where traces go and how log lines look (docs/telemetry.md).
//!
//! [`init`] installs the process's subscriber: the log lines (text, or JSON
//! lines that carry the trace and span ids: [`logs`]) and, when an OTLP
//! endpoint is set (here, or by the standard `OTEL_*` variables, which win),
//! the OpenTelemetry layer that makes toolhost's spans
//! ([`toolhost_core::telemetry`]) into OpenTelemetry spans and hands them to
//! [`export`]'s bounded queue. Off, no layer is installed and the spans'
//! callsites stay disabled.

mod export;
mod logs;

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use serde::{Deserialize, Serialize};
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use toolhost_core::telemetry::TARGET;

/// The default log filter (`TOOLHOST_LOG` replaces it).
const DEFAULT_FILTER: &str = "info,wasmtime=warn,cranelift=warn,rmcp=warn";

/// `[telemetry]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP receiver's base URL (`/v1/traces` is added unless it is
    /// there); none: no export. `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is)
    /// or `OTEL_EXPORTER_OTLP_ENDPOINT` win.
    pub endpoint: Option<String>,
    /// `http/protobuf`, the only one built in (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: String,
    /// The share of new traces sampled, 0..=1 (a caller's sampled flag is
    /// followed); `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` win.
    pub sample_ratio: f64,
    /// `service.name` (`OTEL_SERVICE_NAME` wins).
    pub service_name: String,
    /// Headers sent to the receiver (an API key); values hidden when the
    /// configuration is shown. `OTEL_EXPORTER_OTLP_HEADERS` adds to them.
    pub headers: BTreeMap<String, Hidden>,
    /// Spans waiting for export at most; beyond, dropped (counted in
    /// `/metrics`) and never waited for.
    pub queue: usize,
    /// How long one export may take, in ms.
    pub timeout_ms: u64,
    /// `text` or `json` (`TOOLHOST_LOG_FORMAT` wins): JSON lines carry
    /// `trace_id` and `span_id`.
    pub log_format: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            endpoint: None,
            protocol: "http/protobuf".into(),
            sample_ratio: 1.0,
            service_name: "toolhost".into(),
            headers: BTreeMap::new(),
            queue: 2048,
            timeout_ms: 10_000,
            log_format: "text".into(),
        }
    }
}

/// A value never shown (`Debug`, serialisation).
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Hidden(pub String);

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

impl Serialize for Hidden {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("[hidden]")
    }
}

/// What the file and the environment decide, checked.
#[derive(Debug, PartialEq)]
struct Settings {
    /// The traces URL; none: no export.
    url: Option<String>,
    /// Sampled share of new traces, and whether a caller's flag is followed.
    ratio: f64,
    parent_based: bool,
    json_logs: bool,
}

impl TelemetryConfig {
    /// Refuse what cannot work (at start-up and by `check-config`).
    pub fn check(&self) -> anyhow::Result<()> {
        self.settings(&|name| std::env::var(name).ok()).map(|_| ())
    }

    fn settings(&self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_else(|| self.protocol.clone());
        if protocol != "http/protobuf" {
            bail!(
                "[telemetry] protocol `{protocol}` is not built in: use `http/protobuf` (OTLP over HTTP, port 4318 on most receivers)"
            );
        }
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v == "none");
        let url = match (
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT").or_else(|| self.endpoint.clone()),
        ) {
            (Some(url), _) => Some(url),
            (None, Some(base)) if base.trim_end_matches('/').ends_with("/v1/traces") => Some(base),
            (None, Some(base)) => Some(format!("{}/v1/traces", base.trim_end_matches('/'))),
            (None, None) => None,
        };
        if let Some(url) = &url {
            let parsed: axum::http::Uri = url
                .parse()
                .with_context(|| format!("[telemetry] endpoint `{url}` is not a URL"))?;
            if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
                bail!("[telemetry] endpoint `{url}`: an http:// or https:// URL with a host");
            }
        }
        let (ratio, parent_based) = match set("OTEL_TRACES_SAMPLER").as_deref() {
            None => (self.sample_ratio, true),
            Some(sampler) => {
                let arg = set("OTEL_TRACES_SAMPLER_ARG");
                let ratio = || -> anyhow::Result<f64> {
                    arg.as_deref().map_or(Ok(1.0), |a| {
                        a.trim().parse().with_context(|| {
                            format!("OTEL_TRACES_SAMPLER_ARG `{a}` is not a number")
                        })
                    })
                };
                match sampler {
                    "always_on" => (1.0, false),
                    "always_off" => (0.0, false),
                    "traceidratio" => (ratio()?, false),
                    "parentbased_always_on" => (1.0, true),
                    "parentbased_always_off" => (0.0, true),
                    "parentbased_traceidratio" => (ratio()?, true),
                    other => bail!(
                        "OTEL_TRACES_SAMPLER `{other}` is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
                    ),
                }
            }
        };
        if !(0.0..=1.0).contains(&ratio) {
            bail!("[telemetry] sample_ratio {ratio}: between 0 and 1");
        }
        if self.queue == 0 || self.queue > 1_000_000 {
            bail!("[telemetry] queue {}: between 1 and 1000000", self.queue);
        }
        let format = set("TOOLHOST_LOG_FORMAT").unwrap_or_else(|| self.log_format.clone());
        let json_logs = match format.as_str() {
            "text" => false,
            "json" => true,
            other => bail!("[telemetry] log_format `{other}`: `text` or `json`"),
        };
        Ok(Settings {
            url: url.filter(|_| !disabled),
            ratio,
            parent_based,
            json_logs,
        })
    }
}

/// Keeps the exporter for as long as the process serves: dropped, it
/// sends what is queued (a few seconds at most).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown();
        }
    }
}

/// Install the process's subscriber: log lines as `config` says, spans
/// exported when an endpoint is set.
pub fn init(config: &TelemetryConfig) -> anyhow::Result<Telemetry> {
    let settings = config.settings(&|name| std::env::var(name).ok())?;
    let filter = || {
        EnvFilter::try_from_env("TOOLHOST_LOG")
            .unwrap_or_else(|_| DEFAULT_FILTER.into())
            .add_directive(format!("{TARGET}=off").parse().expect("a valid directive"))
    };
    let log_layer = if settings.json_logs {
        fmt::layer()
            .with_writer(std::io::stderr)
            .fmt_fields(fmt::format::JsonFields::new())
            .event_format(logs::JsonLines)
            .with_filter(filter())
            .boxed()
    } else {
        fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .boxed()
    };
    let (otel_layer, provider) = match &settings.url {
        None => (None, None),
        Some(url) => {
            let provider = provider(config, url)?;
            let tracer = provider.tracer("toolhost");
            // Spans made apart from `tracing` (a node driver's steps).
            opentelemetry::global::set_tracer_provider(provider.clone());
            // INFO, the level of toolhost's spans: a higher one would raise
            // the process's maximum level, and every `log` record of every
            // dependency would be offered to the subscriber.
            let spans = Targets::new().with_target(TARGET, Level::INFO);
            let layer = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_tracked_inactivity(false)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_level(false)
                .with_filter(spans);
            // The sampling is decided before a request's first span is made
            // (`telemetry::sample`): a trace not kept makes no span at all;
            // the SDK records every span it is given.
            toolhost_core::telemetry::set_exporting(settings.ratio, settings.parent_based);
            (Some(layer), Some(provider))
        }
    };
    tracing_subscriber::registry()
        .with(log_layer)
        .with(otel_layer)
        .try_init()
        .context("the log subscriber was already installed")?;
    if let Some(url) = &settings.url {
        tracing::info!(
            url,
            ratio = settings.ratio,
            parent_based = settings.parent_based,
            "traces exported over OTLP/HTTP"
        );
    }
    Ok(Telemetry { provider })
}

fn provider(config: &TelemetryConfig, url: &str) -> anyhow::Result<SdkTracerProvider> {
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(config.service_name.clone());
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let queue = export::Queue::start(export::Target {
        url: url.to_owned(),
        headers: config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect(),
        // The standard variables win here too (the exporter would take
        // the file's value over them).
        timeout: std::time::Duration::from_millis(
            [
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ]
            .iter()
            .find_map(|name| std::env::var(name).ok()?.trim().parse().ok())
            .unwrap_or(config.timeout_ms),
        ),
        capacity: config.queue,
        resource: resource.clone(),
    })?;
    Ok(SdkTracerProvider::builder()
        .with_span_processor(queue)
        .with_sampler(Sampler::AlwaysOn)
        .with_resource(resource)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(config: &TelemetryConfig, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        config.settings(&|name| env.get(name).cloned())
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        let c = TelemetryConfig::default();
        assert_eq!(settings(&c, &[]).unwrap().url, None);
        let on = TelemetryConfig {
            endpoint: Some("http://127.0.0.1:4318/".into()),
            ..c.clone()
        };
        assert_eq!(
            settings(&on, &[]).unwrap().url.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            settings(&on, &[("OTEL_SDK_DISABLED", "true")]).unwrap().url,
            None
        );
        assert_eq!(
            settings(&on, &[("OTEL_TRACES_EXPORTER", "none")])
                .unwrap()
                .url,
            None
        );
    }

    #[test]
    fn the_standard_variables_win() {
        let c = TelemetryConfig {
            endpoint: Some("http://file:4318".into()),
            sample_ratio: 0.5,
            ..TelemetryConfig::default()
        };
        let s = settings(
            &c,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006"),
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
                ("TOOLHOST_LOG_FORMAT", "json"),
            ],
        )
        .unwrap();
        assert_eq!(s.url.as_deref(), Some("http://127.0.0.1:6006/v1/traces"));
        assert_eq!((s.ratio, s.parent_based, s.json_logs), (0.1, false, true));
        let s = settings(
            &c,
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/x")],
        )
        .unwrap();
        assert_eq!(s.url.as_deref(), Some("http://127.0.0.1:9/x"));
        assert_eq!((s.ratio, s.parent_based), (0.5, true));
    }

    #[test]
    fn what_cannot_work_is_refused_by_name() {
        let c = TelemetryConfig::default();
        for (config, env, says) in [
            (
                TelemetryConfig {
                    protocol: "grpc".into(),
                    ..c.clone()
                },
                vec![],
                "protocol `grpc`",
            ),
            (
                c.clone(),
                vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
                "protocol `grpc`",
            ),
            (
                TelemetryConfig {
                    endpoint: Some("ftp://x".into()),
                    ..c.clone()
                },
                vec![],
                "endpoint `ftp://x/v1/traces`",
            ),
            (
                TelemetryConfig {
                    sample_ratio: 2.0,
                    ..c.clone()
                },
                vec![],
                "sample_ratio 2",
            ),
            (
                c.clone(),
                vec![("OTEL_TRACES_SAMPLER", "sometimes")],
                "`sometimes`",
            ),
            (
                c.clone(),
                vec![
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "x"),
                ],
                "`x` is not a number",
            ),
            (
                TelemetryConfig {
                    log_format: "xml".into(),
                    ..c.clone()
                },
                vec![],
                "`xml`",
            ),
            (
                TelemetryConfig {
                    queue: 0,
                    ..c.clone()
                },
                vec![],
                "queue 0",
            ),
        ] {
            let e = settings(&config, &env).unwrap_err().to_string();
            assert!(e.contains(says), "{e} / {says}");
        }
    }

    #[test]
    fn headers_are_never_shown() {
        let c: TelemetryConfig = toml::from_str(
            "endpoint = \"http://x\"\nheaders = { authorization = \"Bearer s3cret\" }",
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(!serde_json::to_string(&c).unwrap().contains("s3cret"));
    }
}
