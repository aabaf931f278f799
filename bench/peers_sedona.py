#!/usr/bin/env python3
"""Peer benchmark: Apache Sedona's exact kNN join on Spark (local mode), to put beside nearkit's
Dask join (bench/dask_join.py) on the same machine.

    python bench/peers_sedona.py --queries 1000000 --data 1000000 --k 8 --cores 2 [--check]

What runs: uniform random points in [0,1)^d (float64, numpy, np.random.default_rng(seed): data =
rng.random((M, d)) first, then queries = rng.random((N, d)), as dask_join.py draws them) become
two Spark DataFrames of (id BIGINT, geom GEOMETRY) built with Sedona's ST_Point (d = 2) or
ST_PointZ (d = 3), cached; then

    SELECT q.id AS qid, d.id AS did FROM q JOIN d ON ST_KNN(q.geom, d.geom, k, false)

which Sedona plans as its KNNJoinExec (exact, partitioned: QUADTREE_RTREE spatial partitioning
of the data side, query side assigned to non-overlapping partitions and expanded, an STRtree per
partition, k nearest with ties broken arbitrarily (spark.sedona.join.knn.includeTieBreakers is
left false), Euclidean distance). The script checks the physical plan contains "KNNJoin" and
fails otherwise. ST_AKNN (the approximate variant) is not used.

2-D ONLY. Sedona's ST_KNN measures distance with JTS Geometry.distance and indexes with a JTS
STRtree, both planar (x, y): the Z of a POINT Z is carried but ignored. So the honest comparison
is --dims 2 (the default): points with z = 0 for nearkit, i.e. give nearkit
np.c_[xy, np.zeros(len(xy))] of the same xy arrays (note rng.random((M, 2)) draws other numbers
than the 3-column arrays dask_join.py draws for the same seed). --dims 3 exists only to show
this: it builds POINT Z geometries, Sedona still returns 2-D neighbours, and --check then
reports mismatches against the 3-D answer.

Phases timed (wall clock, seconds): generate (numpy); spark_start (JVM + session + Sedona
registration; then an untimed 1000 x 2000 warm-up join unless --no-warmup); stage (--load
parquet, the default: numpy -> one uncompressed parquet file per partition with pyarrow, no
Spark); load (Spark reads the files, or with --load arrow takes pandas through Arrow, builds the
geometries with ST_Point, persists and counts: both inputs cached as geometries); join (the kNN
join, fully materialised); total = load + join (generate, spark_start and stage are printed
apart). Materialisation (--sink): "noop" (default) writes every output
row (qid, did) to Spark's no-op data source, so all rows are produced but nothing is stored, and
the row count comes from a DataFrame observation on the same pass; "count" runs df.count();
"parquet" writes (qid, did) to --out (default /tmp/peers_sedona_out.parquet, overwritten).

--check (sizes up to --check-max queries): collects (qid, did), verifies there are N*k rows and
compares each query's neighbour set with scipy cKDTree's (on x, y: what Sedona computes; with
--dims 3 also against the x, y, z answer). A differing set whose sorted distances agree to 1e-12
is counted as a tie (a legitimate different choice among equidistant points), anything else as a
mismatch; the exit status is 1 when there is a mismatch (2-D check only).

Sedona itself: this machine reaches PyPI but not Maven Central, and no PyPI package ships a
Sedona >= 1.7 jar. --jars names the jar(s) to load. The default is a local "knn-min" build from
Apache Sedona's source (1.8.1-SNAPSHOT, commit 5c85e70) with its JTS 1.20.0: the spark/common +
common modules, with the kNN join code untouched and the parts that need jars not on PyPI
(GeoTools raster/CRS, S2, H3, libpostal, straight skeleton) left out. With an upstream shaded
jar (e.g. --jars sedona-spark-shaded-3.5_2.12-1.8.0.jar,geotools-wrapper-1.8.0-33.1.jar where
Maven is reachable) the script registers Sedona through org.apache.sedona.spark.SedonaContext
instead. pip pins: bench/requirements-sedona.txt (pyspark 3.5.7, Scala 2.12; Java 17).
"""
import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import zipfile

import numpy as np

DEFAULT_JAR = os.environ.get(
    "SEDONA_JARS", "/work/sedona/jars/sedona-knn-min-1.8.1-SNAPSHOT.jar")


def sedona_build_info(jars):
    """Text describing the Sedona jar(s): the knn-min build's note, or the jar file names."""
    for j in jars:
        try:
            with zipfile.ZipFile(j) as z:
                if "SEDONA-KNN-MIN.txt" in z.namelist():
                    return " ".join(z.read("SEDONA-KNN-MIN.txt").decode().split())
        except (OSError, zipfile.BadZipFile):
            pass
    return "jars: " + ", ".join(os.path.basename(j) for j in jars)


def start_spark(args, jars):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master(f"local[{args.cores}]")
         .appName("peers_sedona")
         .config("spark.jars", ",".join(jars))
         .config("spark.driver.memory", args.driver_memory)
         .config("spark.driver.maxResultSize", "4g")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
         .config("spark.kryo.registrator", "org.apache.sedona.core.serde.SedonaKryoRegistrator")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "false")
         .config("spark.default.parallelism", str(args.partitions))
         .config("spark.sql.shuffle.partitions", str(args.partitions))
         .config("spark.sql.adaptive.enabled", "false")
         .config("spark.sql.autoBroadcastJoinThreshold", "-1"))
    for kv in args.conf:
        key, value = kv.split("=", 1)
        b = b.config(key, value)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from py4j.java_gateway import JavaClass

    jvm = spark._jvm
    if isinstance(jvm.org.apache.sedona.knnmin.KnnMinContext, JavaClass):
        jvm.org.apache.sedona.knnmin.KnnMinContext.create(spark._jsparkSession)
    elif isinstance(jvm.org.apache.sedona.spark.SedonaContext, JavaClass):  # upstream jar
        jvm.org.apache.sedona.spark.SedonaContext.create(spark._jsparkSession, "python")
    else:
        sys.exit(f"no Sedona classes in {jars}")
    return spark


def columns(arr, start, stop):
    cols = {"id": np.arange(start, stop, dtype=np.int64), "x": arr[start:stop, 0],
            "y": arr[start:stop, 1]}
    if arr.shape[1] == 3:
        cols["z"] = arr[start:stop, 2]
    return cols


def stage_parquet(arr, path, partitions):
    """Write arr as `partitions` uncompressed parquet files (pyarrow, no Spark)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(path)
    bounds = np.linspace(0, len(arr), partitions + 1).astype(np.int64)
    for i in range(partitions):
        pq.write_table(pa.table(columns(arr, bounds[i], bounds[i + 1])),
                       os.path.join(path, f"part-{i:05d}.parquet"), compression="none")


def to_df(spark, arr, name, dims, partitions, staged=None):
    """(id, geom) DataFrame of arr, cached and counted, registered as view `name`. From the
    parquet files at `staged` when given, else from pandas through Arrow."""
    if staged:
        sdf = spark.read.parquet(staged)
    else:
        import pandas as pd

        sdf = spark.createDataFrame(pd.DataFrame(columns(arr, 0, len(arr))))
    if sdf.rdd.getNumPartitions() != partitions:
        sdf = sdf.repartition(partitions)
    ctor = "ST_Point(x, y)" if dims == 2 else "ST_PointZ(x, y, z)"
    g = sdf.selectExpr("id", f"{ctor} AS geom").persist()
    n = g.count()
    assert n == len(arr), (name, n, len(arr))
    g.createOrReplaceTempView(name)
    return g


def check(res_q, res_d, data, queries, k, dims):
    from scipy.spatial import cKDTree

    n = len(queries)
    out = {"rows": int(len(res_q)), "expected_rows": n * k}
    order = np.lexsort((res_d, res_q))
    res_q, res_d = res_q[order], res_d[order]
    counts = np.bincount(res_q, minlength=n)
    out["queries_with_wrong_count"] = int(np.sum(counts != k))
    starts = np.concatenate([[0], np.cumsum(counts)])

    def compare(dcols):
        tree = cKDTree(data[:, :dcols])
        _, ii = tree.query(queries[:, :dcols], k=k, workers=1)
        ii = ii.reshape(n, k)
        mism = ties = 0
        examples = []
        for q in range(n):
            got = res_d[starts[q]:starts[q + 1]]
            want = np.sort(ii[q])
            if len(got) == k and np.array_equal(np.sort(got), want):
                continue
            dq = queries[q, :dcols]
            dg = np.sort(np.linalg.norm(data[got, :dcols] - dq, axis=1))
            dw = np.sort(np.linalg.norm(data[want, :dcols] - dq, axis=1))
            if len(got) == k and np.allclose(dg, dw, rtol=0, atol=1e-12):
                ties += 1
            else:
                mism += 1
                if len(examples) < 3:
                    examples.append({"query": q, "sedona": got.tolist(), "scipy": want.tolist()})
        return {"mismatches": mism, "ties": ties, "examples": examples}

    out["vs_2d"] = compare(2)
    if dims == 3:
        out["vs_3d"] = compare(3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--data", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dims", type=int, default=2, choices=[2, 3])
    ap.add_argument("--cores", type=int, default=2, help="local[C] Spark master")
    ap.add_argument("--partitions", type=int, default=None,
                    help="input partitions of each side (default max(4*C, ceil(M/500k))); "
                         "Sedona asks its quadtree for as many spatial partitions as the data "
                         "side has (it may make fewer: 4 leaves for 8 at 1M uniform points)")
    ap.add_argument("--driver-memory", default="16g",
                    help="JVM heap of the local-mode driver (= the only executor)")
    ap.add_argument("--sink", default="noop", choices=["noop", "count", "parquet"])
    ap.add_argument("--out", default="/tmp/peers_sedona_out.parquet")
    ap.add_argument("--load", default="parquet", choices=["parquet", "arrow"],
                    help="parquet: numpy -> parquet files (pyarrow, timed as 'stage') read by "
                         "Spark; arrow: spark.createDataFrame(pandas) through Arrow")
    ap.add_argument("--tmp", default="/tmp", help="where the staged parquet files go")
    ap.add_argument("--repeat", type=int, default=1, help="join runs on the cached inputs")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="skip the untimed 1000 x 2000 warm-up join")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-max", type=int, default=2_000_000)
    ap.add_argument("--jars", default=DEFAULT_JAR, help="comma-separated Sedona jar(s)")
    ap.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value")
    args = ap.parse_args()
    if args.partitions is None:
        args.partitions = max(4 * args.cores, -(-args.data // 500_000))
    if args.check and args.queries > args.check_max:
        ap.error(f"--check is for small sizes (queries <= --check-max {args.check_max})")
    jars = [j for j in args.jars.split(",") if j]
    for j in jars:
        if not os.path.exists(j):
            sys.exit(f"Sedona jar not found: {j} (see --jars)")

    t = {}
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    data = rng.random((args.data, args.dims))
    queries = rng.random((args.queries, args.dims))
    t["generate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    spark = start_spark(args, jars)
    t["spark_start"] = time.perf_counter() - t0
    jvm = spark._jvm
    versions = {
        "spark": spark.version,
        "sedona": sedona_build_info(jars),
        "java": f"{jvm.System.getProperty('java.version')} ({jvm.System.getProperty('java.vm.name')})",
        "python": platform.python_version(),
        "numpy": np.__version__,
    }

    tmp = tempfile.mkdtemp(prefix="peers_sedona_", dir=args.tmp)
    try:
        if args.warmup:  # JIT and class loading on a tiny join, outside the timings
            w = np.random.default_rng(12345).random((2000, args.dims))
            staged = None
            if args.load == "parquet":
                staged = [os.path.join(tmp, "warm_d"), os.path.join(tmp, "warm_q")]
                stage_parquet(w, staged[0], args.cores)
                stage_parquet(w[:1000], staged[1], args.cores)
            to_df(spark, w, "d", args.dims, args.cores, staged and staged[0])
            to_df(spark, w[:1000], "q", args.dims, args.cores, staged and staged[1])
            spark.sql(f"SELECT q.id, d.id FROM q JOIN d ON ST_KNN(q.geom, d.geom, {args.k}, false)"
                      ).write.format("noop").mode("overwrite").save()
            spark.catalog.clearCache()

        staged = [None, None]
        if args.load == "parquet":
            t0 = time.perf_counter()
            staged = [os.path.join(tmp, "data"), os.path.join(tmp, "queries")]
            stage_parquet(data, staged[0], args.partitions)
            stage_parquet(queries, staged[1], args.partitions)
            t["stage"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        ddf = to_df(spark, data, "d", args.dims, args.partitions, staged[0])
        qdf = to_df(spark, queries, "q", args.dims, args.partitions, staged[1])
        t["load"] = time.perf_counter() - t0
        status = run_join(spark, args, t, data, queries, ddf, qdf, versions)
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(status)


def run_join(spark, args, t, data, queries, ddf, qdf, versions):
    parts = {"data": ddf.rdd.getNumPartitions(), "queries": qdf.rdd.getNumPartitions()}

    sql = (f"SELECT q.id AS qid, d.id AS did FROM q JOIN d "
           f"ON ST_KNN(q.geom, d.geom, {args.k}, false)")
    join = spark.sql(sql)
    plan = join._jdf.queryExecution().executedPlan().toString()
    if "KNNJoin" not in plan:
        sys.exit("Sedona did not plan a KNN join:\n" + plan)
    plan_node = next(line.strip(" :+-") for line in plan.splitlines() if "KNNJoin" in line)

    from pyspark.sql import Observation, functions as F

    joins, rows = [], None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        if args.sink == "count":
            rows = join.count()
        elif args.sink == "noop":
            obs = Observation("rows")
            join.observe(obs, F.count(F.lit(1)).alias("n")).write.format("noop").mode("overwrite").save()
            rows = obs.get["n"]
        else:
            join.write.mode("overwrite").parquet(args.out)
            rows = spark.read.parquet(args.out).count()  # parquet footers only
        joins.append(time.perf_counter() - t0)
    t["join"] = min(joins)
    t["total"] = t["load"] + t["join"]

    result = {
        "peer": "sedona-knn-join", "queries": args.queries, "data": args.data, "k": args.k,
        "dims": args.dims, "seed": args.seed, "cores": args.cores,
        "driver_memory": args.driver_memory, "partitions": parts, "load": args.load,
        "sink": args.sink,
        "rows": rows, "plan": plan_node, "versions": versions,
        "seconds": {key: round(v, 3) for key, v in t.items()},
        "join_runs": [round(v, 3) for v in joins],
    }
    for key, v in versions.items():
        print(f"{key:>12}: {v}")
    print(f"{'plan':>12}: {plan_node}")
    print(f"{'partitions':>12}: data {parts['data']}, queries {parts['queries']}")
    print(f"{'rows':>12}: {rows} (expected {args.queries * args.k}), sink {args.sink}")
    for key in ["generate", "spark_start", "stage", "load", "join", "total"]:
        if key in t:
            print(f"{key:>12}: {t[key]:9.3f} s")
    if args.repeat > 1:
        print(f"{'join runs':>12}: {', '.join(f'{v:.3f}' for v in joins)}")

    status = 0
    if args.check:
        pdf = join.toPandas()
        c = check(pdf["qid"].to_numpy(np.int64), pdf["did"].to_numpy(np.int64),
                  data, queries, args.k, args.dims)
        result["check"] = c
        ok = (c["rows"] == c["expected_rows"] and c["queries_with_wrong_count"] == 0
              and c["vs_2d"]["mismatches"] == 0)
        print(f"{'check':>12}: {'PASS' if ok else 'FAIL'} rows {c['rows']}/{c['expected_rows']}, "
              f"2-D: {c['vs_2d']['mismatches']} mismatches, {c['vs_2d']['ties']} ties"
              + (f"; 3-D: {c['vs_3d']['mismatches']} mismatches, {c['vs_3d']['ties']} ties"
                 if "vs_3d" in c else ""))
        status = 0 if ok else 1
    print("RESULT " + json.dumps(result))
    return status


if __name__ == "__main__":
    main()
