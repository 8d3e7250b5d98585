//! The `X-Project` header in the OpenAPI document: every operation of the project-scoped
//! routes ([`crate::project_routes`], the routes whose handlers take [`Project`] or
//! [`MaybeProject`], or resolve the project themselves like the terminal's) names it, with
//! the answers its resolution gives: 400 when several projects are possible and none is
//! named, 404 for a project the caller cannot reach, 409 for a person in no project.
//!
//! The routes are grouped where they are registered instead of being listed here again; the
//! API test `openapi_routes` sends every documented operation an unknown `X-Project` and
//! checks that exactly the operations documented with the header resolve it.
//!
//! [`Project`]: crate::project::Project
//! [`MaybeProject`]: crate::project::MaybeProject

use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{OpenApi, Required, Response};

/// The header's name in the document.
pub const HEADER: &str = "X-Project";

/// The longest `X-Project` that can name a project: a UUID is 36 characters, a slug at most
/// 63 ([`sandbox_agents_domain::identity`]'s slug rule).
const MAX_LEN: usize = 63;

/// `doc` (the project-scoped routes' part) with the header and its answers on every operation.
pub fn document(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        crate::error_docs::operations_mut(item).for_each(describe);
    }
}

fn header() -> Parameter {
    ParameterBuilder::new()
        .name(HEADER)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "The project to act in, by id or slug. Needed when the credential reaches several \
             projects (400 otherwise: \"never guess\"); an API key bound to one project, or a \
             deployment or person with exactly one, needs none. A project the caller cannot \
             reach is a 404.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                // Empty (or blank) is no header at all: not a rule's violation.
                .max_length(Some(MAX_LEN)),
        ))
        .build()
}

fn describe(operation: &mut Operation) {
    let parameters = operation.parameters.get_or_insert_with(Vec::new);
    if !parameters.iter().any(|p| p.name == HEADER) {
        parameters.push(header());
    }
    let responses = &mut operation.responses.responses;
    for (status, said) in [
        (
            "400",
            "Several projects are possible and the request names none (`X-Project`)",
        ),
        (
            "404",
            "Not found (or the project named by `X-Project` is not one the caller reaches)",
        ),
        (
            "409",
            "A conflict (a person in no project yet has nothing to act in)",
        ),
    ] {
        responses
            .entry(status.into())
            .or_insert_with(|| Response::new(said).into());
    }
}
