"""The store's tables. Columns are only ever added (with a default of NULL), so an older store opens."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS deployments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    engine TEXT NOT NULL,
    spec TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS launches (
    id INTEGER PRIMARY KEY,
    deployment_id INTEGER NOT NULL REFERENCES deployments(id),
    created REAL NOT NULL,
    state TEXT NOT NULL,
    phase TEXT NOT NULL,
    url TEXT NOT NULL,
    log_path TEXT NOT NULL,
    argv TEXT,
    pid INTEGER,
    pgid INTEGER,
    watcher_pid INTEGER,
    leader_start REAL,
    ended REAL,
    exit_code INTEGER,
    reason TEXT,
    diagnosis TEXT
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    launch_id INTEGER NOT NULL REFERENCES launches(id),
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    phase TEXT,
    data TEXT
);
CREATE INDEX IF NOT EXISTS events_by_launch ON events(launch_id, id);
CREATE TABLE IF NOT EXISTS bench_runs (
    id INTEGER PRIMARY KEY,
    created REAL NOT NULL,
    label TEXT NOT NULL,
    url TEXT NOT NULL,
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    state TEXT NOT NULL,
    launch_id INTEGER,
    tokenizer TEXT,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS bench_levels (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES bench_runs(id),
    idx INTEGER NOT NULL,
    concurrency INTEGER,
    request_rate REAL,
    state TEXT NOT NULL,
    started REAL,
    ended REAL,
    summary TEXT,
    spec_decode TEXT,
    client TEXT,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS bench_requests (
    id INTEGER PRIMARY KEY,
    level_id INTEGER NOT NULL REFERENCES bench_levels(id),
    idx INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    scheduled REAL,
    sent REAL,
    done REAL,
    status INTEGER,
    error_kind TEXT,
    error TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    chunks BLOB,
    chunk_tokens BLOB,
    perf_sent REAL
);
CREATE INDEX IF NOT EXISTS requests_by_level ON bench_requests(level_id, idx);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY,
    created REAL NOT NULL,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    ended REAL,
    pid INTEGER
);
CREATE TABLE IF NOT EXISTS sweep_attempts (
    id INTEGER PRIMARY KEY,
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    variant TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    rung TEXT NOT NULL,
    launch_id INTEGER,
    state TEXT NOT NULL,
    category TEXT,
    reason TEXT,
    root_cause TEXT,
    remedy TEXT,
    started REAL NOT NULL,
    ready_s REAL,
    ended REAL,
    release_s REAL,
    gpu_release_s REAL
);
CREATE TABLE IF NOT EXISTS sweep_cells (
    id INTEGER PRIMARY KEY,
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    variant TEXT NOT NULL,
    level INTEGER NOT NULL,
    concurrency INTEGER,
    request_rate REAL,
    repeat INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempt_id INTEGER,
    run_id INTEGER,
    reason TEXT,
    started REAL,
    ended REAL
);
CREATE INDEX IF NOT EXISTS cells_by_sweep ON sweep_cells(sweep_id, variant, level, repeat);
"""

# Columns added after stores were created: added in place when an older store is opened.
ADDED_COLUMNS = (
    ("bench_requests", "perf_sent", "REAL"),
    ("launches", "leader_start", "REAL"),
    ("sweep_attempts", "gpu_release_s", "REAL"),
)
