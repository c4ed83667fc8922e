"""A cron-style job that must not run twice at once: it takes a lock, and
every write it makes to the reports service carries the lease's fencing
token, through the stamping adapter. If this run stalls past its lease and
a newer run takes over, the service rejects this run's late writes.

Here the reports service is fence's own storage (it checks Fencing-Token
like any fenced service would); point REPORTS_URL at yours.

    FENCE_ADDR=http://127.0.0.1:7700 python3 cron_job.py
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

import fence

JOB = "nightly-report"
ADDR = os.environ.get("FENCE_ADDR", "http://127.0.0.1:7700")
REPORTS_URL = os.environ.get("REPORTS_URL", ADDR.split(",")[0] + "/v1/kv/" + JOB)


def build_report() -> dict:
    """The job's work: here, a small summary per region."""
    return {region: {"orders": n, "at": time.time()} for region, n in (("eu", 120), ("us", 340))}


def main() -> int:
    client = fence.Client(ADDR, auth_token=os.environ.get("FENCE_AUTH_TOKEN"))
    try:
        with client.lock(JOB, ttl=30) as lease:
            print("lock %s held with token %d" % (JOB, lease.token))
            opener = lease.opener()  # stamps Fencing-Token (and Fence-Sequencer) on writes
            for region, summary in build_report().items():
                req = urllib.request.Request(
                    "%s/%s" % (REPORTS_URL, region),
                    data=json.dumps(summary).encode(),
                    method="PUT",
                    headers={"Content-Type": "application/json"},
                )
                with opener.open(req, timeout=10) as resp:
                    print("wrote %s: HTTP %d" % (region, resp.status))
            print("done")
            return 0
    except fence.LockHeldError as e:
        print("another run holds %s; it expires in %.0fs at most" % (JOB, e.retry_after or 0))
        return 0
    except urllib.error.HTTPError as e:
        if e.code == 409:  # fenced: a newer run took over while this one stalled
            print("fenced: a newer run of %s took over; stopping" % JOB, file=sys.stderr)
            return 1
        raise
    except (fence.LeaseLostError, fence.LeaseExpiredError, fence.LeaseEndedError) as e:
        print("lease lost, some writes may have been rejected: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
