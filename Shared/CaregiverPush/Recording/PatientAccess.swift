import FoundationEssentials
import FunctionRuntime
import Libpq

/// Whose dose a request records, and who records it (docs/behaviour.md#access).
///
/// A patient records for itself: `patientId` absent or its own. A caregiver names the patient and must be actively
/// linked to it. Anything else is 404, indistinguishable from a patient that does not exist.
public struct PatientAccess: Sendable, Equatable {
    public enum Role: String, Sendable {
        case patient = "PATIENT"
        case caregiver = "CAREGIVER"
    }

    public let patientID: AppID
    /// `recorded_by_role` / `recorded_by_id`: the patient's id, or the caregiver's (a Supabase user id) as text.
    public let role: Role
    public let recorderID: AppID
    /// The caregiver who recorded, who is not pushed about their own action.
    public let actingCaregiverID: UUID?

    /// The access a validated `patientId` field asks for, before a caregiver's link is known: a patient's own, or
    /// the named patient's for a caregiver (confirmed by ``linkQuery`` and ``checkLink(_:)`` in the transaction).
    /// - Throws: ``Problem`` 404 when a patient names another patient.
    static func requested(_ principal: Principal, requestedPatientID: AppID?) throws(Problem) -> PatientAccess {
        switch principal {
        case .patient(let id, _):
            guard requestedPatientID == nil || requestedPatientID == id else { throw notFound }
            return PatientAccess(patientID: id, role: .patient, recorderID: id, actingCaregiverID: nil)
        case .caregiver(let caregiverID):
            // A missing patientId is rejected by validation before this point.
            guard let patientID = requestedPatientID else { throw notFound }
            return PatientAccess(
                patientID: patientID, role: .caregiver, recorderID: AppID(caregiverID), actingCaregiverID: caregiverID)
        }
    }

    /// For a caregiver, the statement that returns a row when its link to the patient is active; `nil` for a
    /// patient, whose own access needs no check. Sent with the transaction's first reads; its rows go to
    /// ``checkLink(_:)`` before anything else read with it is used.
    var linkQuery: PostgresQuery? {
        guard role == .caregiver else { return nil }
        return "SELECT * FROM caregiver_push.find_active_link(\(actingCaregiverID)::text, \(patientID)::text)"
    }

    /// A statement that takes the transaction-scoped advisory lock (`namespace`, `hashtext(key)`) only when the
    /// access holds, and returns a row when it took it: for a caregiver the link check and the lock are one
    /// statement, so a caregiver without an active link never holds the lock. Its rows go to ``checkLink(_:)``.
    func lockQuery(namespace: Int, key: String) -> PostgresQuery {
        guard role == .caregiver else { return "SELECT pg_advisory_xact_lock(\(namespace), hashtext(\(key)))" }
        return """
            SELECT pg_advisory_xact_lock(\(namespace), hashtext(\(key)))
            FROM caregiver_push.find_active_link(\(actingCaregiverID)::text, \(patientID)::text)
            """
    }

    /// Confirms a caregiver's access from what ``linkQuery`` (or ``lockQuery(namespace:key:)``) returned.
    /// - Throws: ``Problem`` 404 (not linked), indistinguishable from a patient that does not exist.
    func checkLink(_ rows: PostgresRows) throws(Problem) {
        guard role == .patient || !rows.isEmpty else { throw Self.notFound }
    }

    static let notFound = Problem.notFound("No such patient.")
}
