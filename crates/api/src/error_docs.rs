//! The errors of every operation in the OpenAPI document, written once instead of in each
//! handler's annotation: the body of every 4xx and 5xx answer ([`ErrorBody`], a 422's
//! [`ValidationErrorBody`]; [`ApiError::body`] makes both), and the 422 of the shared
//! extractors ([`ApiJson`], [`ApiQuery`], and headers parsed like them), which any operation
//! that takes a body, query parameters or headers can answer.
//!
//! Besides, the answers any route can give whatever its handler does, from the layers every
//! request passes ([`crate::router`]): 429 with `Retry-After` from the per-credential rate
//! limit (every route but `/api/health`, [`crate::auth::layer`]), 503 with `Retry-After` when
//! the database's pool is busy or the database unreachable (every route reads it, if only to
//! check the credential), 413 from the body limit on every operation that takes a body
//! ([`crate::limits`]), 403 on a change made with a browser session without the CSRF header
//! ([`crate::auth::layer`]), and 404 on an operation whose path names something.
//!
//! [`ErrorBody`]: crate::error::ErrorBody
//! [`ValidationErrorBody`]: crate::error::ValidationErrorBody
//! [`ApiError::body`]: crate::error::ApiError::body
//! [`ApiJson`]: crate::extract::ApiJson
//! [`ApiQuery`]: crate::extract::ApiQuery

use crate::auth::is_public;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, Operation, ParameterIn, PathItem};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{OpenApi, Ref, RefOr, Response, ResponseBuilder};

/// `doc` with every operation's errors described.
pub fn document(mut doc: OpenApi) -> OpenApi {
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, operation) in methods_mut(item) {
            describe_layers(path, method, operation);
            describe_errors(operation);
        }
    }
    doc
}

/// Every operation of a path item with its method.
pub(crate) fn methods_mut(
    item: &mut PathItem,
) -> impl Iterator<Item = (HttpMethod, &mut Operation)> {
    [
        (HttpMethod::Get, &mut item.get),
        (HttpMethod::Put, &mut item.put),
        (HttpMethod::Post, &mut item.post),
        (HttpMethod::Delete, &mut item.delete),
        (HttpMethod::Options, &mut item.options),
        (HttpMethod::Head, &mut item.head),
        (HttpMethod::Patch, &mut item.patch),
        (HttpMethod::Trace, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.as_mut().map(|op| (m, op)))
}

/// A response that says when to try again.
fn retry_later(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .minimum(Some(1)),
                )
                .description(Some("Whole seconds to wait before trying again"))
                .build(),
        )
        .build()
}

/// The answers of the layers every request passes (see the module's comment).
fn describe_layers(path: &str, method: HttpMethod, operation: &mut Operation) {
    let public = is_public(path);
    let takes_body = operation.request_body.is_some();
    let names_something = path.contains('{');
    let changes = !matches!(
        method,
        HttpMethod::Get | HttpMethod::Head | HttpMethod::Options
    );
    let responses = &mut operation.responses.responses;
    let mut add = |status: &str, response: Response| {
        let entry = responses
            .entry(status.into())
            .or_insert_with(|| response.clone().into());
        // An answer the handler documents itself still says when to try again.
        if let (RefOr::T(documented), Some(retry)) = (entry, response.headers.get("Retry-After")) {
            documented
                .headers
                .entry("Retry-After".into())
                .or_insert_with(|| retry.clone());
        }
    };
    if path != "/api/health" {
        add(
            "429",
            retry_later("Over the credential's request rate; nothing was done"),
        );
    }
    add(
        "503",
        retry_later("The server is busy (every database connection in use) or the database is unreachable; nothing was done"),
    );
    if takes_body {
        add(
            "413",
            Response::new("The request body is over this operation's limit"),
        );
    }
    if names_something {
        add("404", Response::new("Not found"));
    }
    if changes && !public {
        add(
            "403",
            Response::new("Not allowed: the caller's role may not do this, or a change made with a browser session lacks the `X-Requested-With` header"),
        );
    }
}

/// Every operation of a path item, whatever its method.
pub(crate) fn operations_mut(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

fn describe_errors(operation: &mut Operation) {
    let takes_input = operation.request_body.is_some()
        || operation
            .parameters
            .iter()
            .flatten()
            .any(|p| matches!(p.parameter_in, ParameterIn::Query | ParameterIn::Header));
    let responses = &mut operation.responses.responses;
    if takes_input && !responses.contains_key("422") {
        responses.insert(
            "422".into(),
            Response::new("A parameter or the body is invalid: `detail` lists each field's error")
                .into(),
        );
    }
    for (status, response) in responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        let error = status.starts_with('4') || status.starts_with('5');
        if !error || !response.content.is_empty() {
            continue;
        }
        let schema = if status == "422" {
            "ValidationErrorBody"
        } else {
            "ErrorBody"
        };
        response.content.insert(
            "application/json".into(),
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name(schema)))
                .build(),
        );
    }
}
