//! The server's database pool (`store::connect`): a connection idle long enough that something
//! may have closed it under the pool is pinged before it is handed out; one closed while in
//! recent use fails one query at most, and the pool replaces it.

use sandbox_agents_store::Db;
use sandbox_agents_testkit::fresh_database;
use std::time::Duration;

/// `store::database::PING_IDLE_FOR`, and a margin.
const IDLE: Duration = Duration::from_millis(5_500);

async fn backend_pid(db: &Db) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("select pg_backend_pid()")
        .fetch_one(db)
        .await
}

/// Terminates `pid`'s backend, as a database restart or a proxy's idle timeout would, and
/// waits until it is gone.
async fn terminate(admin: &Db, pid: i32) {
    let _: bool = sqlx::query_scalar("select pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(admin)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let alive: bool =
            sqlx::query_scalar("select exists(select 1 from pg_stat_activity where pid = $1)")
                .bind(pid)
                .fetch_one(admin)
                .await
                .unwrap();
        if !alive {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "backend {pid} lives on"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_connection_closed_under_the_pool_is_replaced() {
    let (admin, options) = fresh_database().await;
    let db = sandbox_agents_store::connect(options, 1).await.unwrap();

    // In recent use, so not pinged: the first query after may meet the closed socket, the
    // next one has a new connection.
    let first = backend_pid(&db).await.unwrap();
    terminate(&admin, first).await;
    let second = match backend_pid(&db).await {
        Ok(pid) => pid,
        Err(_) => backend_pid(&db)
            .await
            .expect("the pool replaced its connection"),
    };
    assert_ne!(second, first);

    // Idle past the ping's threshold (the wait is the condition itself): the ping finds it
    // closed, and the query never sees it.
    tokio::time::sleep(IDLE).await;
    terminate(&admin, second).await;
    let third = backend_pid(&db)
        .await
        .expect("an idle connection closed under the pool is pinged, closed and replaced");
    assert_ne!(third, second);
}
