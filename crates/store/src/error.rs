//! The store's error: what the API maps to 404, 409 and 500.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No such row in this project.
    #[error("not found")]
    NotFound,
    /// The request is fine but the state is not; the message is for a person.
    #[error("{0}")]
    Conflict(String),
    /// A stored document no longer parses: a bug or a manual edit, never the caller's fault.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The name of the constraint a database error violated, if any.
pub(crate) fn constraint(e: &sqlx::Error) -> Option<&str> {
    match e {
        sqlx::Error::Database(db) => db.constraint(),
        _ => None,
    }
}
