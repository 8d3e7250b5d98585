//! Which server processes are alive, told by PostgreSQL itself: each process holds an
//! advisory lock (in the two-key space, class [`CLASS`], so it never meets the one-key locks
//! of admission) on a connection of its own for as long as it lives. The connection dies with the
//! process, `kill -9` included, and the lock with it: a lock nobody holds is a dead process.

use crate::error::Result;
use sqlx::PgConnection;

/// The first key of every liveness lock.
pub const CLASS: i32 = 0x5341_4c56; // "SALV"

/// Takes the liveness lock `key` on `conn` if nobody holds it.
pub async fn try_hold(conn: &mut PgConnection, key: i32) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"select pg_try_advisory_lock($1, $2) as "got!""#,
        CLASS,
        key
    )
    .fetch_one(&mut *conn)
    .await?)
}

/// Whether a process holds the liveness lock `key`, read from `pg_locks`: taking nothing, so a
/// caller cancelled half-way cannot leave the lock held by a pooled connection (which would
/// make a dead process look alive for as long as that connection lived).
pub async fn is_alive(db: impl sqlx::PgExecutor<'_>, key: i32) -> Result<bool> {
    // A two-key advisory lock shows its keys as classid and objid, with objsubid 2.
    Ok(sqlx::query_scalar!(
        r#"select exists (select 1 from pg_locks
            where locktype = 'advisory' and granted and objsubid = 2
              and classid::int8 = $1::int8 and objid::int8 = $2::int8
              and database = (select oid from pg_database where datname = current_database())
           ) as "held!""#,
        i64::from(CLASS),
        i64::from(key)
    )
    .fetch_one(db)
    .await?)
}

/// How many server processes are alive on this database: the liveness locks held in it.
pub async fn count_alive(db: impl sqlx::PgExecutor<'_>) -> Result<i64> {
    // A two-key advisory lock shows its keys as classid and objid, with objsubid 2.
    Ok(sqlx::query_scalar!(
        r#"select count(*) as "n!" from pg_locks
            where locktype = 'advisory' and granted and objsubid = 2
              and classid::int8 = $1::int8
              and database = (select oid from pg_database where datname = current_database())"#,
        i64::from(CLASS)
    )
    .fetch_one(db)
    .await?)
}

/// How many server processes other than the holder of `key` are alive on this database.
pub async fn count_alive_besides(db: impl sqlx::PgExecutor<'_>, key: i32) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"select count(*) as "n!" from pg_locks
            where locktype = 'advisory' and granted and objsubid = 2
              and classid::int8 = $1::int8 and objid::int8 <> $2::int8
              and database = (select oid from pg_database where datname = current_database())"#,
        i64::from(CLASS),
        i64::from(key)
    )
    .fetch_one(db)
    .await?)
}
