-- The deployment's egress CA (issue 36): the certificate the egress proxy signs a host's
-- certificate with when it adds a bound credential to a sandbox's HTTPS requests. One row,
-- made by the first server process that needs it; every process signs with the same CA, so
-- a sandbox trusts it whichever process serves its connections. The key is sealed with the
-- master key (AAD `egress-ca`), the certificate is public (sandboxes trust it).
create table egress_ca (
    id smallint primary key default 1 check (id = 1),
    cert_pem text not null,
    key_sealed bytea not null,
    created_at timestamptz not null default now()
);
