//! This deployment's identity: one id shared by every server process on the database, written
//! on every container it creates so the reconciler can tell its containers from others'.

use sqlx::PgExecutor;

pub async fn id(db: impl PgExecutor<'_>) -> crate::Result<String> {
    Ok(sqlx::query_scalar!("select id from deployment")
        .fetch_one(db)
        .await?)
}
