//! The backend conformance suite: what every [`SandboxBackend`] must do, written once against
//! the trait and run against each implementation ([`conformance_suite!`] in `backends.rs`).
//!
//! A [`Subject`] makes backends of one implementation, each on a fresh deployment id (so
//! `list` sees only its own sandboxes). What a backend can do is what it declares
//! (`SandboxBackend::capabilities`, also what `GET /api/backends` shows): a case holds it to
//! every part it declares, and one that needs what it does not declare says so on stderr and
//! passes. Every case cleans up
//! through a [`Harness`], even when it fails.

pub mod cases;
pub mod exec_cases;
pub mod port_cases;

pub use crate::support::{req, session, sh, text, Harness, Subject};

/// Says on stderr that a case does not apply to an implementation (and why).
pub fn not_applicable(case: &str, why: &str) {
    eprintln!("{case}: not applicable to this backend ({why})");
}

/// The whole suite as `#[tokio::test]`s in a module `$name`, for the [`Subject`] `$subject`.
#[macro_export]
macro_rules! conformance_suite {
    ($name:ident, $subject:expr) => {
        mod $name {
            use $crate::conformance::{cases, exec_cases, port_cases};
            $crate::conformance_suite!(@cases $subject;
                cases::lifecycle_labels_stop_and_idempotent_remove,
                cases::the_same_session_replaces_its_old_sandbox_and_missing_images_are_reported,
                cases::archives_round_trip_as_the_sandbox_user,
                cases::the_sandbox_is_unprivileged_and_limited,
                cases::a_snapshot_keeps_the_filesystem_but_not_the_workspace_or_the_session_env,
                cases::a_snapshot_while_commands_start_completes,
                cases::a_pooled_sandbox_is_handed_to_a_session,
                cases::disk_usage_counts_what_a_sandbox_writes,
                exec_cases::exit_codes_stdin_env_and_workdir,
                exec_cases::a_timeout_kills_the_command_tree_not_the_sandbox,
                exec_cases::output_beyond_the_cap_is_drained,
                exec_cases::output_streams_as_it_is_written,
                exec_cases::background_processes_through_the_daemon,
                port_cases::a_service_on_the_sandbox_loopback_is_reached_through_the_backend,
            );
        }
    };
    (@cases $subject:expr; $($module:ident :: $case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                $module::$case($subject).await;
            }
        )+
    };
}
