//! What the cache's test suites share: the two backends a test runs on.

/// Where a test's cache lives: a file, or a database on a throwaway PostgreSQL server.
#[derive(Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Each named test function (taking a [`Backend`]) runs on both backends: `sqlite::NAME`
/// on a file, `postgres::NAME` on a throwaway PostgreSQL server. The calling test file
/// has `Backend` in scope.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Sqlite)
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Postgres)
            })*
        }
    };
}
pub(crate) use on_both_backends;
