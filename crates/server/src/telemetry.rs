//! Structured logs through `tracing` (`RUST_LOG` filters them) and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, the same
//! spans as OpenTelemetry traces over OTLP/HTTP (protobuf), batched on a thread of their own.
//!
//! What a trace holds: every HTTP request (`request`, with its `request_id`), the run it
//! started (`run`, a child of that request, so the request id and trace id are carried
//! through the whole turn, however long it lasts), and inside it each model call
//! (`chat <model>`) and sandbox tool call (`execute_tool <name>`) with the attributes of the
//! OpenTelemetry GenAI semantic conventions (`gen_ai.operation.name`, `gen_ai.provider.name`,
//! `gen_ai.request.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
//! `gen_ai.response.finish_reasons`, `gen_ai.tool.name`, `gen_ai.tool.call.id`).
//! The standard `OTEL_*` variables (headers, timeout, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`) apply.

use crate::config::LogFormat;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Flushes the traces still batched when dropped (at exit).
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.traces.take() {
            if let Err(e) = p.shutdown() {
                eprintln!("sandbox-agents: flushing the traces failed: {e}");
            }
        }
    }
}

/// Whether the environment asks for traces.
fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
}

fn tracer_provider() -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| e.to_string())?;
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "sandbox-agents".into());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

pub fn init(format: LogFormat) -> Telemetry {
    let filter =
        || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_target(true).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_target(true)
            .json()
            .flatten_event(true)
            .with_current_span(true)
            // The request's span too, so a run's lines carry the request id that started it.
            .with_span_list(true)
            .boxed(),
    };
    let (traces, failed) = if otlp_configured() {
        match tracer_provider() {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e)),
        }
    } else {
        (None, None)
    };
    // Traces carry the spans at info and above, whatever RUST_LOG says of the log lines.
    let otel = traces.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("sandbox-agents"))
            .with_filter(EnvFilter::new(
                "info,sqlx=warn,h2=warn,hyper=warn,reqwest=warn",
            ))
    });
    tracing_subscriber::registry()
        .with(logs.with_filter(filter()))
        .with(otel)
        .init();
    if let Some(e) = failed {
        tracing::error!(error = %e, "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter could not be built: no traces are sent");
    } else if traces.is_some() {
        tracing::info!("sending traces over OTLP/HTTP");
    }
    Telemetry { traces }
}
