pub mod bench;
pub mod gen;
pub mod knn;
pub mod nearest;
pub mod pairs;
