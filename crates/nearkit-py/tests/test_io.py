"""read_points and read_mesh: the command's readers."""

import numpy as np
import pytest

import nearkit


def test_points_from_every_format(tmp_path, rng):
    p = rng.uniform(-100, 100, (50, 3)).round(3)
    np.save(tmp_path / "p.npy", p)
    np.save(tmp_path / "i.npy", p.astype(np.int64))
    np.savetxt(tmp_path / "p.csv", p, delimiter=",", header="x,y,z", comments="")
    np.savetxt(tmp_path / "p.xyz", p)
    np.testing.assert_array_equal(nearkit.read_points(tmp_path / "p.npy"), p)
    np.testing.assert_array_equal(nearkit.read_points(tmp_path / "i.npy"), p.astype(np.int64))
    np.testing.assert_allclose(nearkit.read_points(str(tmp_path / "p.csv")), p)
    np.testing.assert_allclose(nearkit.read_points(tmp_path / "p.xyz"), p)
    f32 = nearkit.read_points(tmp_path / "p.npy", dtype=np.float32)
    assert f32.dtype == np.float32 and f32.shape == (50, 3)
    np.savetxt(tmp_path / "c.csv", np.column_stack([np.arange(50), p]), delimiter=",", header="id,a,b,c", comments="")
    np.testing.assert_allclose(nearkit.read_points(tmp_path / "c.csv", columns=["c", "b", "a"]), p[:, ::-1])
    np.testing.assert_allclose(nearkit.read_points(tmp_path / "c.csv", columns=[1, 2, 3]), p)


def test_mesh_from_off_and_obj(tmp_path):
    (tmp_path / "quad.off").write_text("OFF\n4 1 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n")
    v, f = nearkit.read_mesh(tmp_path / "quad.off")
    assert v.shape == (4, 3) and f.tolist() == [[0, 1, 2], [0, 2, 3]] and f.dtype == np.int64
    (tmp_path / "tri.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    v, f = nearkit.read_mesh(tmp_path / "tri.obj", dtype=np.float32)
    assert v.dtype == np.float32 and f.tolist() == [[0, 1, 2]]
    cp = nearkit.MeshIndex(v, f).closest_point([[0.2, 0.2, 1.0]])
    assert abs(float(cp.distance[0]) - 1.0) < 1e-6


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        nearkit.read_points(tmp_path / "missing.csv")
    (tmp_path / "bad.csv").write_text("x,y,z\n1,2,3\n4,oops,6\n")
    with pytest.raises(OSError, match="bad.csv, line 3"):
        nearkit.read_points(tmp_path / "bad.csv")
    (tmp_path / "p.dat").write_text("1 2 3\n")
    with pytest.raises(OSError, match="unknown extension"):
        nearkit.read_points(tmp_path / "p.dat")
    (tmp_path / "p.xyz").write_text("1 2 3\n")
    with pytest.raises(OSError, match="not a mesh format"):
        nearkit.read_mesh(tmp_path / "p.xyz")
    (tmp_path / "big.csv").write_text("1e300,0,0\n")
    with pytest.raises(OSError, match="does not fit f32.*dtype=float64 holds it"):
        nearkit.read_points(tmp_path / "big.csv", dtype=np.float32)
    with pytest.raises(ValueError, match="dtype"):
        nearkit.read_points(tmp_path / "big.csv", dtype=np.int32)
