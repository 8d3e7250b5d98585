//! `notebook_cells`: the journal of a session's Python kernel (see the migration). The
//! kernel (`sessions::kernel`) writes a cell before it runs and completes it when it ends;
//! `GET /api/sessions/{id}/notebook` reads them in order.

use crate::error::{Error, Result};
use sandbox_agents_domain::notebook::{CellStatus, NotebookCell};
use sandbox_agents_domain::{RunId, SessionId};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::PgExecutor;

/// The most cells a notebook returns (the oldest first); a session with more shows the
/// latest ones.
pub const MAX_CELLS: i64 = 2_000;

/// Records a cell about to run (status `running`). A session's cells run one at a time, so
/// one still `running` is one whose run was interrupted before it answered: it becomes
/// `interrupted` in the same statement.
#[tracing::instrument(skip_all, fields(session.id = %session, cell = %id))]
pub async fn begin(
    db: impl PgExecutor<'_>,
    session: SessionId,
    run: Option<RunId>,
    id: &str,
    code: &str,
) -> Result<()> {
    sqlx::query!(
        "with stale as (
             update notebook_cells set status = 'interrupted', finished_at = now()
              where session_id = $1 and status = 'running'
         )
         insert into notebook_cells (session_id, id, run_id, code) values ($1, $2, $3, $4)",
        session.0,
        id,
        run.map(|r| r.0),
        code,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Completes a cell with how it ended.
#[tracing::instrument(skip_all, fields(session.id = %session, cell = %id))]
pub async fn finish(
    db: impl PgExecutor<'_>,
    session: SessionId,
    id: &str,
    outputs: &[Value],
    execution_count: Option<i64>,
    status: CellStatus,
    epoch: Option<&str>,
) -> Result<NotebookCell> {
    sqlx::query_as!(
        Row,
        r#"update notebook_cells
              set outputs = $3, execution_count = $4, status = $5, epoch = $6, finished_at = now()
            where session_id = $1 and id = $2
        returning id, code, outputs as "outputs: Json<Vec<Value>>", execution_count,
                  status as "status: CellStatus", epoch, started_at, finished_at"#,
        session.0,
        id,
        Json(outputs) as _,
        execution_count,
        status as _,
        epoch,
    )
    .fetch_optional(db)
    .await?
    .map(Row::into_cell)
    .ok_or(Error::NotFound)
}

/// The kernel epoch of the session's latest cell that finished in one; None before any.
pub async fn last_epoch(db: impl PgExecutor<'_>, session: SessionId) -> Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        r#"select epoch as "epoch!" from notebook_cells
            where session_id = $1 and epoch is not null
            order by idx desc limit 1"#,
        session.0,
    )
    .fetch_optional(db)
    .await?)
}

/// The session's cells in the order they started (at most [`MAX_CELLS`], the latest).
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn list(db: impl PgExecutor<'_>, session: SessionId) -> Result<Vec<NotebookCell>> {
    let rows = sqlx::query_as!(
        Row,
        r#"select id, code, outputs as "outputs: Json<Vec<Value>>", execution_count,
                  status as "status: CellStatus", epoch, started_at, finished_at
             from (select * from notebook_cells where session_id = $1
                    order by idx desc limit $2) latest
            order by idx"#,
        session.0,
        MAX_CELLS,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Row::into_cell).collect())
}

struct Row {
    id: String,
    code: String,
    outputs: Json<Vec<Value>>,
    execution_count: Option<i64>,
    status: CellStatus,
    epoch: Option<String>,
    started_at: time::OffsetDateTime,
    finished_at: Option<time::OffsetDateTime>,
}

impl Row {
    fn into_cell(self) -> NotebookCell {
        NotebookCell {
            id: self.id,
            code: self.code,
            outputs: self.outputs.0,
            execution_count: self.execution_count,
            status: self.status,
            epoch: self.epoch,
            started_at: self.started_at,
            finished_at: self.finished_at,
        }
    }
}
