//! The one map from a [`ServiceError`] to what a user is told of it: a [`Status`] and a
//! [`Detail`]. The API answers with exactly this (`ApiError: From<ServiceError>`), and a run
//! or a boot that fails records the same detail in the event log, so the two cannot disagree.
//!
//! The rule: a failure the caller (or an operator, through the caller) can act on says what
//! went wrong and what to do; a failure whose cause is ours (the database, a backend
//! message, a bug) says only `internal error (reference <id>)` and logs the cause once under
//! that reference ([`internal_reference`]).

use crate::{internal_reference, ServiceError};
use sandbox_agents_domain::FieldError;
use sandbox_agents_sandbox::SandboxError;

/// The HTTP status of a failure, named here rather than as an HTTP library's type: this
/// crate sits below the API and must not depend on its framework.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    BadRequest,
    Forbidden,
    NotFound,
    Conflict,
    PayloadTooLarge,
    /// A spending limit is reached (402: what the caller's account allows is used up).
    PaymentRequired,
    /// Only with [`Detail::Fields`].
    UnprocessableEntity,
    /// Only with an `internal error (reference <id>)` detail.
    InternalServerError,
    /// Trying again shortly may work (the API adds `Retry-After`).
    ServiceUnavailable,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::BadRequest => 400,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::Conflict => 409,
            Status::PayloadTooLarge => 413,
            Status::PaymentRequired => 402,
            Status::UnprocessableEntity => 422,
            Status::InternalServerError => 500,
            Status::ServiceUnavailable => 503,
        }
    }
}

/// What a user reads of a failure.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    /// A sentence for a person.
    Text(String),
    /// Every field error of a request at once (a 422's `detail` list).
    Fields(Vec<FieldError>),
}

/// The text of a detail, where a list does not fit (a run's `error`, an event's payload):
/// field errors' messages joined with `; `.
impl std::fmt::Display for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Detail::Text(t) => f.write_str(t),
            Detail::Fields(errors) => {
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    f.write_str(&e.msg)?;
                }
                Ok(())
            }
        }
    }
}

/// A failure as a user is told of it.
#[derive(Clone, Debug, PartialEq)]
pub struct UserError {
    pub status: Status,
    pub detail: Detail,
}

impl UserError {
    fn text(status: Status, detail: impl Into<String>) -> Self {
        UserError {
            status,
            detail: Detail::Text(detail.into()),
        }
    }

    /// A cause of ours: logged once, here, under the reference the user is shown.
    fn internal(cause: &(dyn std::error::Error + 'static)) -> Self {
        UserError::text(Status::InternalServerError, internal_reference(cause))
    }
}

impl ServiceError {
    /// What a user is told of this error: the one map (see the module's doc). Each call for a
    /// cause of ours logs it under a fresh reference, so call it once per failure shown.
    pub fn for_user(&self) -> UserError {
        use sandbox_agents_store::Error as StoreError;
        match self {
            ServiceError::NotFound(m) => UserError::text(Status::NotFound, m),
            ServiceError::Conflict(m) => UserError::text(Status::Conflict, m),
            ServiceError::BadRequest(m) => UserError::text(Status::BadRequest, m),
            ServiceError::Forbidden(m) => UserError::text(Status::Forbidden, m),
            ServiceError::TooLarge(m) => UserError::text(Status::PayloadTooLarge, m),
            ServiceError::SpendLimit(m) => UserError::text(Status::PaymentRequired, m),
            ServiceError::Validation(errors) => UserError {
                status: Status::UnprocessableEntity,
                detail: Detail::Fields(errors.clone()),
            },
            // Callers name what was not found where they can (`or_not_found` in the API);
            // this is the fallback, as FastAPI words it.
            ServiceError::Store(StoreError::NotFound) => {
                UserError::text(Status::NotFound, "Not Found")
            }
            // The store's conflicts are written for a person (see `store::Error::Conflict`).
            ServiceError::Store(StoreError::Conflict(m)) => UserError::text(Status::Conflict, m),
            ServiceError::Store(StoreError::Corrupt(_)) => UserError::internal(self),
            ServiceError::Store(StoreError::Database(db)) => database(self, db),
            ServiceError::Sandbox(e) => sandbox(self, e),
            ServiceError::Internal(_) => UserError::internal(self),
        }
    }
}

/// A database failure: the ones trying again may get past are a 503 that says so (they
/// say nothing of the request or the data, so they are not ours to hide); the rest are ours.
fn database(whole: &ServiceError, db: &sqlx::Error) -> UserError {
    match db {
        // Every connection was in use for the pool's whole wait: the database is there,
        // this process is busy (counted in sandbox_agents_db_pool_timeouts_total).
        sqlx::Error::PoolTimedOut => {
            tracing::warn!("no database connection was free in time: the server is busy");
            UserError::text(
                Status::ServiceUnavailable,
                "the server is busy (every database connection is in use); try again shortly",
            )
        }
        sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
            tracing::warn!(error = %db, "the database is unreachable");
            UserError::text(
                Status::ServiceUnavailable,
                "the database is unreachable; try again shortly",
            )
        }
        _ => UserError::internal(whole),
    }
}

/// A sandbox backend failure, variant by variant (no wildcard: a new variant is decided
/// here, not defaulted).
fn sandbox(whole: &ServiceError, e: &SandboxError) -> UserError {
    match e {
        // The session exists; its sandbox does not (removed behind the server's back, or
        // stopped under the call). A 404 would tell a client the session it named is gone;
        // the state is what is wrong, and stopping and starting the session mends it.
        SandboxError::NotFound(_) => UserError::text(
            Status::Conflict,
            format!("{e}; stop and start the session to get a new one"),
        ),
        SandboxError::NoSuchPath(_) => UserError::text(Status::NotFound, e.to_string()),
        // Not a fault of the server's code but of the host's state, and the message names
        // what to build: the request can succeed once the image is there.
        SandboxError::ImageMissing(_) => UserError::text(Status::Conflict, e.to_string()),
        // The command's outcome is unknown and the message says what the next call does;
        // the same answer the exec and kernel paths give.
        SandboxError::DaemonLost => UserError::text(Status::Conflict, e.to_string()),
        // The backend's own words may name hosts and internals.
        SandboxError::Backend(_) => UserError::internal(whole),
    }
}
