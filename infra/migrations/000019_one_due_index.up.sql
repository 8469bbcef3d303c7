-- The queue's open rows have one index: push_deliveries_due (000016), which the lease, the next-due look-up and the
-- sweep's housekeeping read. The two partial indexes of 000002 (PENDING rows by next attempt, SENDING rows by lease
-- end) no longer serve a query that the due index does not, and every delivery a recording queues (written SENDING)
-- and every retry (written PENDING) paid an entry in one of them.
DROP INDEX caregiver_push.push_deliveries_pending_due;
DROP INDEX caregiver_push.push_deliveries_leased_until;
