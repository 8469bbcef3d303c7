-- What a lease asks for, served by one index: the deliveries that are due (a PENDING one's next attempt, a SENDING
-- one's lease that ran out), in the order they fell due. The lease used to ask for the two kinds with an OR that no
-- index served in order: under load, with the final rows of past days in the table, it read them all and sorted
-- them for each lease (docs/behaviour.md#leases). The expression is the one DeliveryQueue.lease and
-- DeliveryQueue.millisecondsToNextDue write, word for word, so that the planner matches it.
CREATE INDEX push_deliveries_due ON caregiver_push.push_deliveries
    ((CASE WHEN status = 'PENDING' THEN next_attempt_at ELSE lease_until END))
    WHERE status IN ('PENDING', 'SENDING');
