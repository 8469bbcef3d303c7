import CaregiverPush
import Foundation

/// A patient with linked caregivers, their devices (registered through the real registration code), three morning
/// medications and a PRN one: the household the recording and gateway tests record doses for.
package struct RecordingHousehold {
    package let patient: UUID
    package let patientToken: String
    /// caregiver → its device tokens
    package let caregivers: [(id: UUID, tokens: [String])]
    package let morning: [UUID]
    package let prn: UUID
    package let date = TokyoDay.offset(-1)

    package var allTokens: Set<String> { Set(caregivers.flatMap(\.tokens)) }

    package func values(_ extra: [String: String] = [:]) -> [String: String] {
        var values = [
            "PATIENT_TOKEN": patientToken, "PATIENT_ID": patient.uuidString.lowercased(), "DATE": date,
            "SLOT": "morning", "MEDICATION_ID": morning[0].uuidString.lowercased(),
            "SCHEDULED_AT": TokyoDay.instant(date, "07:00"), "IDEMPOTENCY_KEY": UUID().uuidString,
        ]
        values.merge(extra) { _, new in new }
        return values
    }
}

extension RecordingHousehold {
    package static func make(devicesPerCaregiver: [Int] = [2], displayName: String = "鈴木") throws -> Self {
        try TestDatabase.with { connection in
            let patient = try Seed.patient(connection, displayName: displayName)
            var caregivers: [(UUID, [String])] = []
            for count in devicesPerCaregiver {
                let caregiver = UUID()
                try Seed.link(connection, caregiver: caregiver, patient: patient)
                let tokens = (0..<count).map { _ in makeDeviceToken() }
                for token in tokens {
                    try Seed.registerDevice(token, caregiver: caregiver, connection: connection)
                }
                caregivers.append((caregiver, tokens))
            }
            let morning = try (0..<3).map { index in
                try Seed.medication(connection, patient: patient, name: "秘密の薬\(index)", times: ["0\(7 + index):00"])
            }
            return RecordingHousehold(
                patient: patient, patientToken: try Seed.session(connection, patient: patient),
                caregivers: caregivers.map { (id: $0.0, tokens: $0.1) }, morning: morning,
                prn: try Seed.medication(connection, patient: patient, name: "頓服の秘密", isPRN: true))
        }
    }
}
