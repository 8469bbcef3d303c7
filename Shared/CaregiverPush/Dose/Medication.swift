import Codecs
import Libpq
import FoundationEssentials

/// A recording named a medication the patient does not have; another patient's medication is indistinguishable from
/// none. (A 404: see ErrorProblems.swift.)
struct UnknownMedication: Error {}

/// A patient's medication as far as recording needs it (never its name).
struct Medication {
    let id: AppID
    let isPRN: Bool
    let startDate: LocalDate
    let endDate: LocalDate?
    let isArchived: Bool

    /// Unarchived, and `date` within start…end.
    func isActive(on date: LocalDate) -> Bool {
        !isArchived && startDate <= date && (endDate.map { date <= $0 } ?? true)
    }

    /// The statement that reads the patient's medication `id` for ``found(_:id:)``: no row when there is none, or
    /// when it is another patient's.
    static func findQuery(_ id: AppID, patientID: AppID) -> PostgresQuery {
        """
        SELECT is_prn, start_date::date::text, end_date::date::text, archived_at IS NOT NULL
        FROM caregiver_push.medications WHERE id = \(id) AND patient_id = \(patientID)
        """
    }

    /// The medication ``findQuery(_:patientID:)`` read, or 404: another patient's medication is indistinguishable
    /// from none.
    static func found(_ rows: PostgresRows, id: AppID) throws -> Medication {
        guard let row = rows.single else { throw UnknownMedication() }
        let (isPRN, start, end, archived) = try row.decode((Bool, String, String?, Bool).self)
        guard let startDate = LocalDate(start) else { throw PostgresError(.decoding) }
        return Medication(
            id: id, isPRN: isPRN, startDate: startDate, endDate: end.flatMap(LocalDate.init), isArchived: archived)
    }

    /// The statement that returns a row when `minuteOfDay` (with zero seconds) is one of medication `id`'s schedule
    /// times.
    static func scheduleTimeQuery(_ id: AppID, minuteOfDay: Int) -> PostgresQuery {
        let time = Timestamp.hourMinuteText(minuteOfDay: minuteOfDay) + ":00"
        return
            "SELECT 1 FROM caregiver_push.medication_schedule_times WHERE medication_id = \(id) AND time_of_day = \(time)::time"
    }

    /// The statement that reads the patient's active, scheduled (non-PRN) medications on `date` with their schedule
    /// times, for ``scheduledDoses(_:)``, ordered by medication and time so that concurrent recorders insert in the
    /// same order.
    static func scheduledDosesQuery(patientID: AppID, on date: LocalDate) -> PostgresQuery {
        """
        SELECT m.id, (extract(hour FROM t.time_of_day) * 60 + extract(minute FROM t.time_of_day))::int
        FROM caregiver_push.medications m
        JOIN caregiver_push.medication_schedule_times t ON t.medication_id = m.id
        WHERE m.patient_id = \(patientID) AND m.archived_at IS NULL AND NOT m.is_prn
          AND m.start_date <= \(date.text)::date AND (m.end_date IS NULL OR m.end_date >= \(date.text)::date)
        ORDER BY m.id, t.time_of_day
        """
    }

    /// The doses ``scheduledDosesQuery(patientID:on:)`` read, with their schedule times as minutes of the day.
    static func scheduledDoses(_ rows: PostgresRows) throws -> [(medicationID: AppID, minuteOfDay: Int)] {
        try rows.map { row in
            let (id, minute) = try row.decode((AppID, Int).self)
            return (id, minute)
        }
    }
}
