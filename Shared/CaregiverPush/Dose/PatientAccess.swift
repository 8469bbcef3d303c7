import Codecs
import Libpq
import FunctionRuntime
import FoundationEssentials

/// Whose dose a request records, and who records it (SPEC §4, §6, §7).
///
/// A patient records for itself: `patientId` absent or its own. A caregiver names the patient and must be actively
/// linked to it. Anything else is 404, indistinguishable from a patient that does not exist.
public struct PatientAccess: Sendable, Equatable {
    public enum Role: String, Sendable {
        case patient = "PATIENT"
        case caregiver = "CAREGIVER"
    }

    public let patientID: UUID
    /// `recorded_by_role` / `recorded_by_id`.
    public let role: Role
    public let recorderID: UUID

    /// The caregiver who recorded, who is not pushed about their own action.
    public var actingCaregiverID: UUID? { role == .caregiver ? recorderID : nil }

    /// Resolves access for a validated `patientId` field.
    /// - Throws: ``Problem`` 404 (not yours / not linked), ``PostgresError``.
    public static func resolve(
        _ principal: Principal, requestedPatientID: UUID?, connection: PostgresConnection
    ) throws -> PatientAccess {
        switch principal {
        case .patient(let id, _):
            guard requestedPatientID == nil || requestedPatientID == id else { throw notFound }
            return PatientAccess(patientID: id, role: .patient, recorderID: id)
        case .caregiver(let caregiverID):
            // A missing patientId is rejected by validation before this point.
            guard let patientID = requestedPatientID else { throw notFound }
            let linked = try connection.query(
                """
                SELECT 1 FROM caregiver_patient_links
                WHERE caregiver_id = \(caregiverID) AND patient_id = \(patientID) AND revoked_at IS NULL
                """)
            guard !linked.isEmpty else { throw notFound }
            return PatientAccess(patientID: patientID, role: .caregiver, recorderID: caregiverID)
        }
    }

    static let notFound = Problem.notFound("No such patient.")
}
