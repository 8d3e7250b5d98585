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
    Database(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    /// Every database error of the store, and of callers' transactions, passes here: the one
    /// place that counts the times the pool had no connection to give
    /// (`sandbox_agents_db_pool_timeouts_total`).
    fn from(e: sqlx::Error) -> Self {
        if matches!(e, sqlx::Error::PoolTimedOut) {
            metrics::counter!("sandbox_agents_db_pool_timeouts_total").increment(1);
        }
        Error::Database(e)
    }
}

impl Error {
    /// A failure that says nothing of the request or the data: the pool had no free
    /// connection in time, or the database did not answer. Trying again later may work.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed
            )
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The name of the constraint a database error violated, if any.
pub(crate) fn constraint(e: &sqlx::Error) -> Option<&str> {
    match e {
        sqlx::Error::Database(db) => db.constraint(),
        _ => None,
    }
}
