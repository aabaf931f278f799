pub mod bench;
pub mod gen;
pub mod nearest;
pub mod pairs;
