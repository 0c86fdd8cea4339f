//! The Docker node provider: one or several Docker engines as one pool of
//! nodes (`[docker]`, `[[docker.engines]]`): the engine connections, their
//! placement, health, drain and node images.

pub mod config;
pub mod engine;
mod engine_images;
pub mod engines;
mod placement;
