//! The deployment's egress CA (`egress_ca`, one row): read, or made once by whichever
//! process gets there first.

use sqlx::PgExecutor;

/// The CA's certificate (PEM) and its sealed key.
#[derive(Clone, Debug)]
pub struct EgressCa {
    pub cert_pem: String,
    pub key_sealed: Vec<u8>,
}

/// Stores `candidate` unless a CA exists already, and returns the one that does: two
/// processes starting together agree on the first one written.
#[tracing::instrument(skip_all)]
pub async fn get_or_insert(
    db: impl PgExecutor<'_> + Copy,
    candidate: &EgressCa,
) -> crate::Result<EgressCa> {
    sqlx::query!(
        "insert into egress_ca (id, cert_pem, key_sealed) values (1, $1, $2) on conflict (id) do nothing",
        candidate.cert_pem,
        candidate.key_sealed,
    )
    .execute(db)
    .await?;
    let row = sqlx::query!("select cert_pem, key_sealed from egress_ca where id = 1")
        .fetch_one(db)
        .await?;
    Ok(EgressCa {
        cert_pem: row.cert_pem,
        key_sealed: row.key_sealed,
    })
}

/// The CA, if one was made.
pub async fn get(db: impl PgExecutor<'_>) -> crate::Result<Option<EgressCa>> {
    let row = sqlx::query!("select cert_pem, key_sealed from egress_ca where id = 1")
        .fetch_optional(db)
        .await?;
    Ok(row.map(|r| EgressCa {
        cert_pem: r.cert_pem,
        key_sealed: r.key_sealed,
    }))
}
