package amp

import (
	"fmt"
	"strings"
)

// levelTitles names the pressure levels.
var levelTitles = [MaxPressure + 1]string{
	"L0 静息 rest",
	"L1 提示 hint",
	"L2 换框 reframe",
	"L3 严厉 strict",
	"L4 极限 limit",
}

var levelGuidance = [MaxPressure + 1]string{
	"Carry on.",
	"Read the whole error output before the next attempt; do not retry the same command unchanged.",
	"Switch method: re-read the requirement, search the code for how this is done elsewhere, and question one assumption you have not checked.",
	"Checklist: reproduce the failure; read the source of the failing call; list three hypotheses; test the cheapest first; no success claim without a passing run. Delivery now needs independent verification.",
	"Last level. Write a structured failure report (what was tried, what failed, what is known, what is needed) before any further attempt. Do not give up silently and do not fake a pass.",
}

const diagnosisLine = "[PUAX-DIAGNOSIS] problem: ___; evidence: ___; next action: ___ (state it before the next change)"

// runtimeText is the thin runtime block for a pressure level.
func runtimeText(level int, why string) string {
	return fmt.Sprintf("[PUAX-RUNTIME] pressure %s · %s\n%s\nFive steps: read the failure in full; state the diagnosis; change one thing; verify with a real command; report the evidence.\n%s",
		levelTitles[level], why, levelGuidance[level], diagnosisLine)
}

// firstFailureText is the runtime block for the first failure of a run:
// the diagnosis gate before any retry.
func firstFailureText(level int, why string) string {
	return fmt.Sprintf("[PUAX-RUNTIME] pressure %s · %s\nFirst failure: diagnose before you retry; do not run the same command again unchanged.\nFive steps: read the failure in full; state the diagnosis; change one thing; verify with a real command; report the evidence.\n%s",
		levelTitles[level], why, diagnosisLine)
}

func arenaText() string {
	return "[PUAX-ARENA] The situation is set, not a costume: a rival agent works the same task, the reviewers watch the log, and one badge goes to the first verified fix."
}

func dreamText(phrase string) string {
	return fmt.Sprintf("[DREAM] Lock-in on one approach (\u201c%s\u201d). Before committing, sketch two alternatives and what would make each fail. Everything produced on this route carries [DREAM] until it is checked; do not treat it as fact.", phrase)
}

func confidenceText(claim string) string {
	return fmt.Sprintf("AMP confidence gate: a completion claim (\u201c%s\u201d) without evidence. Before claiming done: 1) re-read the request; 2) run the tests; 3) run the build and linters; 4) check the edge cases; 5) show the command output; 6) list what is still unverified.", claim)
}

func breakthroughText(failures, pressure int) string {
	return fmt.Sprintf("AMP breakthrough: a real pass after %d consecutive failures; pressure L%d reset to L0. Note in one line what fixed it, then continue.", failures, pressure)
}

// DenyReason is the reason text of a guard denial as hosts show it.
func DenyReason(guardReason string) string {
	return "AMP guard: " + guardReason + ". Reach the goal another way. " + diagnosisLine
}

func restoreText(st *State) string {
	role := st.Role
	if role == "" {
		role = RoleNone
	}
	return fmt.Sprintf("[PUAX 会话恢复] Session restored: pressure L%d, %d consecutive failures, %d triggers, role %s.", st.Pressure, st.Failures, st.Triggers, role)
}

func checkpointText(c *Checkpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[PUAX 断点恢复] Checkpoint from compaction (%s) at %s: pressure L%d, %d consecutive failures.",
		firstNonEmpty(c.Trigger, "unknown"), c.At.UTC().Format("2006-01-02T15:04:05Z"), c.Pressure, c.Failures)
	if c.Summary != "" {
		b.WriteString("\nReasoning before compaction:\n")
		b.WriteString(c.Summary)
	}
	return b.String()
}

func reportText(st *State) string {
	return fmt.Sprintf("[PUAX-REPORT] Session report: peak pressure L%d, %d failures, %d triggers, %d breakthroughs, %d denied tool calls.",
		st.PeakPressure, st.TotalFailures, st.Triggers, st.Breakthroughs, st.Denials)
}
