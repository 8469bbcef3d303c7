"""Creates a patient with a fresh session in DATABASE_URL (through psql) and prints the session token.

The database keeps only the SHA-256 of the token, as the functions expect.
"""
import base64
import hashlib
import os
import secrets
import subprocess

token = "pst_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
digest = hashlib.sha256(token.encode()).hexdigest()
sql = (
    "WITH p AS (INSERT INTO caregiver_push.patients (display_name) VALUES ('契約テスト') RETURNING id) "
    "INSERT INTO caregiver_push.patient_sessions (patient_id, token_hash, expires_at) "
    f"SELECT id, decode('{digest}', 'hex'), now() + interval '1 hour' FROM p"
)
subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", os.environ["DATABASE_URL"], "-c", sql], check=True)
print(token)
