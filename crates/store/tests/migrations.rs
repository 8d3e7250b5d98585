//! Migrations that move data keep it: a database is migrated to just before one, rows are
//! written the way the code of that time wrote them, the migration is applied, and the store's
//! own reads find the rows.

use sandbox_agents_store::database::MIGRATOR;
use sandbox_agents_store::{sandbox_pool, sessions, Db};
use uuid::Uuid;

/// The migration that renamed `container_id` to `sandbox_id`.
const SANDBOX_ID: i64 = 20261206150000;

/// A new database in the shared test cluster with every migration below `version` applied, and
/// a pool on it. Each migration's SQL runs as sqlx runs it (one transaction per file), but
/// without sqlx's bookkeeping: the test applies the rest itself with [`apply_from`].
async fn database_before(version: i64) -> Db {
    let (db, _, _) = sandbox_agents_testkit::empty_database(2).await;
    for m in MIGRATOR.iter().filter(|m| m.version < version) {
        apply(&db, m).await;
    }
    db
}

/// Applies every migration from `version` on.
async fn apply_from(db: &Db, version: i64) {
    assert!(
        MIGRATOR.iter().any(|m| m.version == version),
        "no migration {version}"
    );
    for m in MIGRATOR.iter().filter(|m| m.version >= version) {
        apply(db, m).await;
    }
}

async fn apply(db: &Db, m: &sqlx::migrate::Migration) {
    let mut tx = db.begin().await.unwrap();
    sqlx::raw_sql(m.sql.as_ref())
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("migration {} failed: {e}", m.version));
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn renaming_container_id_to_sandbox_id_keeps_every_session_and_pool_row() {
    let db = database_before(SANDBOX_ID).await;
    let (project, agent) = (Uuid::now_v7(), Uuid::now_v7());
    let (running, stopped) = (Uuid::now_v7(), Uuid::now_v7());
    sqlx::query("insert into projects (id, slug, name) values ($1, $2, 'Kept')")
        .bind(project)
        .bind(format!("kept-{}", project.simple()))
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("insert into agents (id, project_id, slug, spec) values ($1, $2, 'a', '{}')")
        .bind(agent)
        .bind(project)
        .execute(&db)
        .await
        .unwrap();
    sqlx::query(
        "insert into sessions (id, project_id, agent_id, status, container_id)
         values ($1, $3, $4, 'running', 'sandbox-of-running'), ($2, $3, $4, 'stopped', null)",
    )
    .bind(running)
    .bind(stopped)
    .bind(project)
    .bind(agent)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query(
        "insert into sandbox_pool (name, image, container_id)
         values ('sa-pool-ready', 'img', 'pooled-sandbox'), ('sa-pool-starting', 'img', null)",
    )
    .execute(&db)
    .await
    .unwrap();

    apply_from(&db, SANDBOX_ID).await;

    let mut owners = sessions::existing(&db, &[running, stopped]).await.unwrap();
    owners.sort();
    let mut expected = vec![
        (running, Some("sandbox-of-running".to_owned())),
        (stopped, None),
    ];
    expected.sort();
    assert_eq!(owners, expected);
    let pool: Vec<(String, Option<String>)> = sandbox_pool::list(&db)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.sandbox_id))
        .collect();
    assert_eq!(
        pool,
        vec![
            (
                "sa-pool-ready".to_owned(),
                Some("pooled-sandbox".to_owned())
            ),
            ("sa-pool-starting".to_owned(), None),
        ]
    );
    // The ready pool row is still found by the claim's partial index predicate.
    let mut tx = db.begin().await.unwrap();
    sqlx::query("update sessions set status = 'provisioning', sandbox_id = null where id = $1")
        .bind(stopped)
        .execute(&mut *tx)
        .await
        .unwrap();
    let claimed = sandbox_pool::claim(&mut tx, "img", sandbox_agents_domain::SessionId(stopped))
        .await
        .unwrap();
    assert_eq!(claimed.as_deref(), Some("pooled-sandbox"));
    tx.rollback().await.unwrap();
}
