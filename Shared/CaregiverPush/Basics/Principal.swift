import FoundationEssentials
import FunctionRuntime

/// Who is calling, once their bearer token has been verified.
public enum Principal: Sendable, Equatable {
    /// A caregiver: the `sub` of a verified Supabase access token.
    case caregiver(id: UUID)
    /// A patient, through an unrevoked, unexpired session token.
    case patient(id: AppID, sessionID: AppID)

    /// The caregiver's id, or 403 for a patient (a valid patient token on a caregiver-only endpoint:
    /// docs/behaviour.md#access).
    public func requireCaregiver() throws(Problem) -> UUID {
        switch self {
        case .caregiver(let id): return id
        case .patient: throw .forbidden("This endpoint is for caregivers.")
        }
    }
}
