/// The `data` of the push sent after a TAKEN dose (docs/behaviour.md#payload): its keys and its `type`.
///
/// FCM requires every `data` value to be a string; on iOS each key arrives as a top-level key of the notification's
/// `userInfo`, next to `aps`. The server's message builder writes these keys and the app's deep-link router reads
/// them, both from here, so the two cannot drift apart.
public enum DoseTakenPayload {
    /// The value of `data.type` for this push.
    public static let type = "DOSE_TAKEN"

    /// The names of the `data` fields.
    public enum Key {
        /// Always ``DoseTakenPayload/type``.
        public static let type = "type"
        /// The app's id of the patient, as the app stores it (a UUID, a cuid, `patient-123`).
        public static let patientID = "patientId"
        /// The dose's Tokyo date, `YYYY-MM-DD`.
        public static let date = "date"
        /// A ``Slot`` raw value.
        public static let slot = "slot"
        /// The slot-bulk recording's id (a lowercase UUID), or the empty string.
        public static let recordingGroupID = "recordingGroupId"
        /// A ``DoseRecorder`` raw value: who recorded the doses.
        public static let recordedBy = "recordedBy"

        /// Every key, in the order docs/behaviour.md#payload lists them.
        public static let all = [type, patientID, date, slot, recordingGroupID, recordedBy]
    }
}
