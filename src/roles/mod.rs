//! What runs inside the containers of a run, all from the one static
//! binary: the load generator (`load`, `fairground load`), the readiness
//! prober (`ready`, `fairground ready`) and the reference server (`serve`,
//! `fairground serve`). They know the endpoint contract and this machine's
//! clock and limits; they know nothing of profiles, plans or the engine, so
//! what they measure cannot depend on how a run was set up.

pub mod load;
pub mod ready;
pub mod serve;
