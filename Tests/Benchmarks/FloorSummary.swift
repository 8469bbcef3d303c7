import Foundation

/// "Down to the floor": every figure of the performance goals in one table, this run's value beside last round's
/// (the figure docs/benchmarks.md had before this round's work, quoted) and the goal. Every "now" value is measured
/// in this run, in the section named; the start-up ratios are against the fair C floors (which check the token as
/// the function does), with the earlier floors' ratio beside them. A missed goal gets a "where the time goes" row.
struct FloorSummary {
    struct Row {
        let figure: String
        /// Last round's figure, quoted.
        let before: String
        let now: Double?
        let format: String
        let goal: String
        /// Whether `now` meets the goal; `nil` when it was not measured.
        let met: Bool?
        let section: String
        /// The same figure against the earlier floor (the start-up rows), measured in this run.
        var earlier: Double? = nil
        /// Where the time goes, for a missed goal: one line, with the section that shows it.
        var whereTimeGoes: String? = nil
    }

    var rows: [Row] = []

    mutating func ratio(
        _ figure: String, before: String, now: Double?, atMost limit: Double, section: String,
        earlier: Double? = nil, whereTimeGoes: String? = nil
    ) {
        rows.append(
            Row(
                figure: figure, before: before, now: now, format: "%.2f", goal: String(format: "≤ %.1f", limit),
                met: now.map { $0 <= limit }, section: section, earlier: earlier, whereTimeGoes: whereTimeGoes))
    }

    mutating func count(
        _ figure: String, before: String, now: Double?, goal: String, met: (Double) -> Bool, section: String,
        whereTimeGoes: String? = nil
    ) {
        rows.append(
            Row(
                figure: figure, before: before, now: now, format: "%.0f", goal: goal, met: now.map(met),
                section: section, whereTimeGoes: whereTimeGoes))
    }

    var markdown: String {
        var text = """

            ## Down to the floor: the goals in one table

            Each figure of this run against its goal, beside last round's (`last round`: what this file said before
            this round's work, quoted, not re-measured). The start-up figures are ratios to the fair C floors, which
            check the bearer token as the function does (HS256 over OpenSSL's SHA-256; "Start-up against C" says what
            they still skip); `earlier floor` is the same figure against the floors of the rounds before, which
            skipped the token's check, measured in the same interleaved loops. Every other column comes from this run;
            the section named holds how it was measured. A missed goal has its "where the time goes" row under it.
            The machine is shared: ratios taken in one run move by about ±0.1 between runs.

            | figure | last round | now | earlier floor | goal | | measured in |
            |---|---:|---:|---:|---|---|---|

            """
        for row in rows {
            let now = row.now.map { String(format: row.format, $0) } ?? "not measured"
            let earlier = row.earlier.map { String(format: row.format, $0) } ?? "—"
            let verdict = row.met.map { $0 ? "met" : "**missed**" } ?? "—"
            text += "| \(row.figure) | \(row.before) | \(now) | \(earlier) | \(row.goal) | \(verdict) "
            text += "| \(row.section) |\n"
            if row.met == false {
                let line = row.whereTimeGoes ?? "not profiled in this run"
                text += "| ↳ where the time goes: \(line) | | | | | | |\n"
            }
        }
        return text
    }
}
