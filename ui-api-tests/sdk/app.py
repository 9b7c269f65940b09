"""A Python process profiled by the real pyroscope-io SDK, pushing to a Stackhouse.

Usage: python3 app.py <server-url> <seconds>
Burns CPU in stackhouse_busy_loop for <seconds>, then shuts the agent down, which
uploads what is still buffered.
"""

import sys
import time

import pyroscope


def stackhouse_busy_loop(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(10000):
            x = (x * 31 + i) % 1000003
    return x


def main():
    url, seconds = sys.argv[1], float(sys.argv[2])
    ok = pyroscope.configure(
        application_name="py-sdk-app",
        server_address=url,
        tags={"env": "test", "region": "eu"},
        upload_interval=2,
        enable_logging=True,
    )
    print("configured", ok, flush=True)
    stackhouse_busy_loop(seconds)
    print("shutdown", pyroscope.shutdown(), flush=True)


if __name__ == "__main__":
    main()
