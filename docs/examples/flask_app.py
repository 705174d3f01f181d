import atexit
import os

import psycopg
from flask import Flask, jsonify

from jobdesk import JobNotFound, SyncJobClient

# One database for the application's tables and for its jobs: jobdesk and psycopg both read it
# from DATABASE_URL (`jobdesk db status` prints the embedded database's).
DATABASE_URL = os.environ["DATABASE_URL"]

app = Flask(__name__)
jobs = SyncJobClient.connect(DATABASE_URL)
atexit.register(jobs.close)


@app.post("/orders/<order_id>")
def place_order(order_id: str):
    with psycopg.connect(DATABASE_URL) as conn, conn.transaction():  # the application's own connection
        conn.execute("INSERT INTO orders (id) VALUES (%s)", (order_id,))
        job_id = jobs.enqueue("order.confirm", {"order": order_id}, connection=conn)
    return jsonify({"job": job_id}), 202


@app.get("/jobs/<job_id>")
def job_status(job_id: str):
    try:
        record = jobs.get_job(job_id)
    except JobNotFound:
        return jsonify({"error": f"no job {job_id}"}), 404
    return jsonify({"status": record.status, "result": record.result_data})
