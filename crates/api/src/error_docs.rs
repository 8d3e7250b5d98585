//! The errors of every operation in the OpenAPI document, written once instead of in each
//! handler's annotation: the body of every 4xx and 5xx answer ([`ErrorBody`], a 422's
//! [`ValidationErrorBody`]; [`ApiError::body`] makes both), and the 422 of the shared
//! extractors ([`ApiJson`], [`ApiQuery`], and headers parsed like them), which any operation
//! that takes a body, query parameters or headers can answer.
//!
//! [`ErrorBody`]: crate::error::ErrorBody
//! [`ValidationErrorBody`]: crate::error::ValidationErrorBody
//! [`ApiError::body`]: crate::error::ApiError::body
//! [`ApiJson`]: crate::extract::ApiJson
//! [`ApiQuery`]: crate::extract::ApiQuery

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::path::{Operation, ParameterIn, PathItem};
use utoipa::openapi::{OpenApi, Ref, RefOr, Response};

/// `doc` with every operation's errors described.
pub fn document(mut doc: OpenApi) -> OpenApi {
    for item in doc.paths.paths.values_mut() {
        operations_mut(item).for_each(describe_errors);
    }
    doc
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
