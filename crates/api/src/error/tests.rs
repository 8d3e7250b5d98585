//! The one error map as a table: every `ServiceError` variant (and every variant of the
//! store's and the sandbox backend's errors inside it) with the status and the detail a
//! client gets, which must be what the event log records of the same failure.

use super::ApiError;
use axum::http::StatusCode;
use sandbox_agents_domain::FieldError;
use sandbox_agents_errors::ServiceError;
use sandbox_agents_sandbox::SandboxError;
use sandbox_agents_store::Error as StoreError;
use serde_json::json;

/// Which arm of the map `e` takes. No wildcard over our own enums: a new variant does not
/// compile until it has an arm here, and then [`every_arm_has_a_row`] fails until the table
/// has a row for it.
fn arm(e: &ServiceError) -> usize {
    match e {
        ServiceError::NotFound(_) => 0,
        ServiceError::Conflict(_) => 1,
        ServiceError::BadRequest(_) => 2,
        ServiceError::Forbidden(_) => 3,
        ServiceError::TooLarge(_) => 4,
        ServiceError::Validation(_) => 5,
        ServiceError::Store(StoreError::NotFound) => 6,
        ServiceError::Store(StoreError::Conflict(_)) => 7,
        ServiceError::Store(StoreError::Corrupt(_)) => 8,
        ServiceError::Store(StoreError::Database(sqlx::Error::PoolTimedOut)) => 9,
        ServiceError::Store(StoreError::Database(sqlx::Error::Io(_))) => 10,
        ServiceError::Store(StoreError::Database(sqlx::Error::PoolClosed)) => 11,
        // sqlx's error is not ours to enumerate (it is non-exhaustive): the rest are ours.
        ServiceError::Store(StoreError::Database(_)) => 12,
        ServiceError::Sandbox(SandboxError::NotFound(_)) => 13,
        ServiceError::Sandbox(SandboxError::NoSuchPath(_)) => 14,
        ServiceError::Sandbox(SandboxError::ImageMissing(_)) => 15,
        ServiceError::Sandbox(SandboxError::DaemonLost) => 16,
        ServiceError::Sandbox(SandboxError::Backend(_)) => 17,
        ServiceError::Internal(_) => 18,
        ServiceError::SpendLimit(_) => 19,
    }
}
const ARMS: usize = 20;

/// What a client must read.
enum Said {
    Exactly(&'static str),
    /// `internal error (reference <12 hex digits>)`, and nothing of the cause.
    Reference,
    /// The field errors themselves (a 422's list).
    Fields,
}

/// The cause a reference must hide.
const SECRET: &str = "db-host-zq81.internal.example";

fn field_error() -> FieldError {
    FieldError {
        kind: "value_error".into(),
        loc: vec!["body".into(), "name".into()],
        msg: "name must not be empty".into(),
        input: json!(""),
    }
}

/// One row of the table: the error (made afresh for each look, as it is not `Clone`), the
/// status and what the client reads.
type Row = (fn() -> ServiceError, u16, Said);

/// One row per arm.
fn table() -> Vec<Row> {
    use Said::*;
    vec![
        (|| ServiceError::NotFound("agent 'x' not found".into()), 404, Exactly("agent 'x' not found")),
        (|| ServiceError::Conflict("the session is running".into()), 409, Exactly("the session is running")),
        (|| ServiceError::BadRequest("not a tar archive".into()), 400, Exactly("not a tar archive")),
        (|| ServiceError::Forbidden("permission denied: a.txt".into()), 403, Exactly("permission denied: a.txt")),
        (|| ServiceError::TooLarge("over 64 MiB".into()), 413, Exactly("over 64 MiB")),
        (|| ServiceError::SpendLimit("the limit is reached".into()), 402, Exactly("the limit is reached")),
        (|| ServiceError::Validation(vec![field_error()]), 422, Fields),
        (|| ServiceError::Store(StoreError::NotFound), 404, Exactly("Not Found")),
        (|| ServiceError::Store(StoreError::Conflict("the name is taken".into())), 409, Exactly("the name is taken")),
        (|| ServiceError::Store(StoreError::Corrupt(SECRET.into())), 500, Reference),
        (
            || ServiceError::Store(StoreError::Database(sqlx::Error::PoolTimedOut)),
            503,
            Exactly("the server is busy (every database connection is in use); try again shortly"),
        ),
        (
            || ServiceError::Store(StoreError::Database(sqlx::Error::Io(std::io::Error::other(SECRET)))),
            503,
            Exactly("the database is unreachable; try again shortly"),
        ),
        (
            || ServiceError::Store(StoreError::Database(sqlx::Error::PoolClosed)),
            503,
            Exactly("the database is unreachable; try again shortly"),
        ),
        (|| ServiceError::Store(StoreError::Database(sqlx::Error::Protocol(SECRET.into()))), 500, Reference),
        (
            || ServiceError::Sandbox(SandboxError::NotFound("3f2a".into())),
            409,
            Exactly("the sandbox 3f2a does not exist; stop and start the session to get a new one"),
        ),
        (
            || ServiceError::Sandbox(SandboxError::NoSuchPath("/workspace/a.txt".into())),
            404,
            Exactly("no such file or directory: /workspace/a.txt"),
        ),
        (
            || ServiceError::Sandbox(SandboxError::ImageMissing("sandbox:latest".into())),
            409,
            Exactly("the image sandbox:latest is not available to the sandbox backend: build it first (images/sandbox/build-offline.sh), or make it pullable by the cluster"),
        ),
        (
            || ServiceError::Sandbox(SandboxError::DaemonLost),
            409,
            Exactly("the sandbox's daemon went away while the command ran (did the command kill it?), so its outcome is unknown; the next command starts the daemon again"),
        ),
        (|| ServiceError::Sandbox(SandboxError::Backend(SECRET.into())), 500, Reference),
        (|| ServiceError::Internal(anyhow::anyhow!(SECRET).context("a bug")), 500, Reference),
    ]
}

#[test]
fn every_arm_has_a_row() {
    let mut seen = [false; ARMS];
    for (make, _, _) in table() {
        seen[arm(&make())] = true;
    }
    let missing: Vec<usize> = (0..ARMS).filter(|a| !seen[*a]).collect();
    assert!(missing.is_empty(), "arms without a row: {missing:?}");
}

fn assert_reference(detail: &str) {
    let id = detail
        .strip_prefix("internal error (reference ")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not a reference: {detail}"));
    assert!(
        id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{detail}"
    );
}

#[test]
fn every_service_error_answers_with_its_status_and_detail() {
    for (make, status, said) in table() {
        let what = format!("{:?}", make());
        let api = ApiError::from(make());
        assert_eq!(
            api.status(),
            StatusCode::from_u16(status).unwrap(),
            "{what}"
        );
        let body = api.body();
        match said {
            Said::Exactly(text) => assert_eq!(body["detail"], text, "{what}"),
            Said::Reference => assert_reference(body["detail"].as_str().unwrap()),
            Said::Fields => assert_eq!(body["detail"], json!([field_error()]), "{what}"),
        }
        assert!(!body.to_string().contains(SECRET), "{what}: {body}");
    }
}

/// What a failed run or boot records ([`ServiceError::for_user`]): the same status and words
/// as the API's answer, a list of field errors as their messages.
#[test]
fn the_event_log_says_what_the_api_says() {
    for (make, status, said) in table() {
        let what = format!("{:?}", make());
        let told = make().for_user();
        assert_eq!(told.status.code(), status, "{what}");
        let text = told.detail.to_string();
        match said {
            Said::Exactly(expected) => assert_eq!(text, expected, "{what}"),
            Said::Reference => assert_reference(&text),
            Said::Fields => assert_eq!(text, "name must not be empty", "{what}"),
        }
        assert!(!text.contains(SECRET), "{what}: {text}");
    }
}

#[test]
fn a_cause_of_ours_raised_in_a_handler_is_a_reference_too() {
    let api = ApiError::Internal(anyhow::anyhow!(SECRET));
    assert_eq!(api.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = api.body();
    assert_reference(body["detail"].as_str().unwrap());
}
