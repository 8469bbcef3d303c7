import Codecs
import Libpq
import FoundationEssentials

/// A recording named a medication the patient does not have; another patient's medication is indistinguishable from
/// none. (A 404: see ErrorProblems.swift.)
struct UnknownMedication: Error {}

/// A patient's medication as far as recording needs it (never its name).
struct Medication {
    let id: UUID
    let isPRN: Bool
    let startDate: LocalDate
    let endDate: LocalDate?
    let isArchived: Bool

    /// Unarchived, and `date` within start…end.
    func isActive(on date: LocalDate) -> Bool {
        !isArchived && startDate <= date && (endDate.map { date <= $0 } ?? true)
    }

    /// The patient's medication `id`, or 404: another patient's medication is indistinguishable from none.
    static func find(_ id: UUID, patientID: UUID, connection: PostgresConnection) throws -> Medication {
        guard
            let row = try connection.query(
                """
                SELECT is_prn, start_date::text, end_date::text, archived_at IS NOT NULL
                FROM medications WHERE id = \(id) AND patient_id = \(patientID)
                """
            ).single
        else { throw UnknownMedication() }
        let (isPRN, start, end, archived) = try row.decode((Bool, String, String?, Bool).self)
        guard let startDate = LocalDate(start) else { throw PostgresError(.decoding) }
        return Medication(id: id, isPRN: isPRN, startDate: startDate, endDate: end.flatMap(LocalDate.init), isArchived: archived)
    }

    /// Whether `minuteOfDay` (with zero seconds) is one of this medication's schedule times.
    func isScheduled(atMinute minuteOfDay: Int, connection: PostgresConnection) throws -> Bool {
        let time = "\(String(minuteOfDay / 60).leftPadded(to: 2)):\(String(minuteOfDay % 60).leftPadded(to: 2)):00"
        return !(try connection.query(
            "SELECT 1 FROM medication_schedule_times WHERE medication_id = \(id) AND time_of_day = \(time)::time"
        ).isEmpty)
    }

    /// The patient's active, scheduled (non-PRN) medications on `date` with their schedule times, as minutes of the
    /// day, ordered by medication and time so that concurrent recorders insert in the same order.
    static func scheduledDoses(
        patientID: UUID, on date: LocalDate, connection: PostgresConnection
    ) throws -> [(medicationID: UUID, minuteOfDay: Int)] {
        try connection.query(
            """
            SELECT m.id, (extract(hour FROM t.time_of_day) * 60 + extract(minute FROM t.time_of_day))::int
            FROM medications m
            JOIN medication_schedule_times t ON t.medication_id = m.id
            WHERE m.patient_id = \(patientID) AND m.archived_at IS NULL AND NOT m.is_prn
              AND m.start_date <= \(date.text)::date AND (m.end_date IS NULL OR m.end_date >= \(date.text)::date)
            ORDER BY m.id, t.time_of_day
            """
        ).map { row in
            let (id, minute) = try row.decode((UUID, Int).self)
            return (id, minute)
        }
    }
}
