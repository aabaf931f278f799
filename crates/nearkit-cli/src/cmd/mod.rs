pub mod bench;
pub mod closest_point;
pub mod collide;
pub mod gen;
pub mod knn;
pub mod nearest;
pub mod pairs;
pub mod within;
