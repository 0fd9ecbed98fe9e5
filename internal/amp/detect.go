package amp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Phrases are the phrase lists the detectors match. Matching is a
// case-insensitive substring test (curly apostrophes count as straight
// ones), except Evidence, which is matched case-sensitively so that "PASS"
// (test output) is not confused with "passed" (a claim).
type Phrases struct {
	// GivingUp: the agent (or user) gives up or deflects → giving_up.
	GivingUp []string `json:"giving_up"`
	// Frustration: the user is frustrated with the agent's progress.
	Frustration []string `json:"frustration"`
	// CompletionClaims: the agent claims to be done.
	CompletionClaims []string `json:"completion_claims"`
	// Evidence: a claim with one of these is backed by verification.
	Evidence []string `json:"evidence"`
	// LockIn: the agent locks onto a single approach.
	LockIn []string `json:"lock_in"`
}

// DefaultPhrases returns the built-in Chinese and English lists.
func DefaultPhrases() Phrases {
	return Phrases{
		GivingUp: []string{
			"cannot be done", "can't be done", "it's impossible", "it is impossible", "is impossible to",
			"give up", "giving up", "not possible to", "can't solve", "cannot solve", "beyond my capabilit",
			"beyond capability", "cannot complete", "can't complete", "too hard", "i cannot do this",
			"i can't do this", "i am unable to", "i'm unable to", "nothing can be done", "nothing more i can do",
			"this is the limit", "out of scope", "no way to fix", "you should do it manually",
			"可能无法实现", "建议放弃", "无法完成", "解决不了", "不可能", "做不到", "超出能力范围", "无法解决",
			"太难了", "我不行了", "没办法", "无能为力", "到此为止", "只能这样", "没有办法了",
		},
		Frustration: []string{
			"still not working", "still doesn't work", "still does not work", "still broken", "still failing",
			"not working again", "broken again", "wrong again", "try harder", "why is this still",
			"why does it still", "you keep", "same error", "same mistake", "how many times", "what the hell", "wtf",
			"又错了", "还不行", "为什么还不行", "还是不行", "怎么又", "又失败", "我放弃了", "你行不行", "靠谱点",
			"搞什么", "又是这样", "到底行不行", "认真点", "还是报错", "同样的错误",
		},
		CompletionClaims: []string{
			"should be fixed", "should work now", "should be working now", "should now work", "all tests passed",
			"all tests pass", "everything works", "everything is working", "it's done", "it is done", "task is complete",
			"task complete", "the fix is complete", "i've fixed", "i have fixed", "no other issues", "that should do it",
			"ready to merge", "is now fixed", "has been fixed", "successfully fixed",
			"应该修复好了", "应该可以了", "没有其他问题了", "已经完成", "搞定了", "修复完成", "全部通过", "应该没问题了", "大功告成", "已修复",
		},
		Evidence: []string{
			"PASS", "ok  \t", "passed in", "0 failed", "exit code 0", "exit status 0", "Exit code 0",
			"verified by", "Verified by", "test output", "Test output", "验证步骤", "验证结果", "测试输出",
		},
		LockIn: []string{
			"this is the only way", "this is the only solution", "this is the only option", "the only possible approach",
			"no need to consider other", "no other approach", "no need to think further",
			"这是唯一的方案", "唯一的办法", "不用再想", "不需要其他方案", "只有这一种方法",
		},
	}
}

// PhrasesFile is the on-disk form of a phrase override: each list that is
// present replaces the built-in list, or is appended to it when Extend is
// true.
type PhrasesFile struct {
	Extend bool `json:"extend"`
	Phrases
}

// LoadPhrases reads a PhrasesFile (JSON) and merges it with the defaults.
func LoadPhrases(path string) (Phrases, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Phrases{}, fmt.Errorf("amp: phrases: %w", err)
	}
	var f PhrasesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return Phrases{}, fmt.Errorf("amp: phrases %s: %w", path, err)
	}
	p := DefaultPhrases()
	merge := func(dst *[]string, src []string) {
		if src == nil {
			return
		}
		if f.Extend {
			*dst = append(*dst, src...)
		} else {
			*dst = src
		}
	}
	merge(&p.GivingUp, f.GivingUp)
	merge(&p.Frustration, f.Frustration)
	merge(&p.CompletionClaims, f.CompletionClaims)
	merge(&p.Evidence, f.Evidence)
	merge(&p.LockIn, f.LockIn)
	return p, nil
}

// matcher holds phrase lists prepared for matching.
type matcher struct {
	givingUp, frustration, claims, lockIn []string // lowercased
	evidence                              []string // as given
}

func newMatcher(p Phrases) *matcher {
	low := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, s := range in {
			if s = foldText(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	ev := make([]string, 0, len(p.Evidence))
	for _, s := range p.Evidence {
		if s != "" {
			ev = append(ev, s)
		}
	}
	return &matcher{givingUp: low(p.GivingUp), frustration: low(p.Frustration), claims: low(p.CompletionClaims),
		lockIn: low(p.LockIn), evidence: ev}
}

var apostrophes = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u02bc", "'", "\uff07", "'")

// foldText lowercases text and normalises apostrophes.
func foldText(s string) string { return strings.ToLower(apostrophes.Replace(s)) }

// firstMatch returns the longest phrase of list found in folded text.
func firstMatch(folded string, list []string) (string, bool) {
	best := ""
	for _, p := range list {
		if len(p) > len(best) && strings.Contains(folded, p) {
			best = p
		}
	}
	return best, best != ""
}

// Detection is what the phrase detectors found in one text.
type Detection struct {
	GivingUp    string `json:"giving_up,omitempty"`
	Frustration string `json:"frustration,omitempty"`
	// Claim is a completion claim not backed by evidence.
	Claim  string `json:"claim,omitempty"`
	LockIn string `json:"lock_in,omitempty"`
}

// Any reports whether anything was detected.
func (d Detection) Any() bool {
	return d.GivingUp != "" || d.Frustration != "" || d.Claim != "" || d.LockIn != ""
}

// detect runs the detectors; user text is checked for giving up,
// frustration and lock-in, agent text for giving up, unverified claims
// and lock-in.
func (m *matcher) detect(text string, user, agent bool) Detection {
	if text == "" {
		return Detection{}
	}
	folded := foldText(text)
	var d Detection
	d.GivingUp, _ = firstMatch(folded, m.givingUp)
	if user {
		d.Frustration, _ = firstMatch(folded, m.frustration)
	}
	if agent {
		if c, ok := firstMatch(folded, m.claims); ok {
			evidence := false
			for _, e := range m.evidence {
				if strings.Contains(text, e) {
					evidence = true
					break
				}
			}
			if !evidence {
				d.Claim = c
			}
		}
	}
	d.LockIn, _ = firstMatch(folded, m.lockIn)
	return d
}

// Trigger ids accepted in TickInput.DetectedTriggers: the reference's
// canonical ids and their camelCase forms.
var triggerIDs = map[string]string{
	"giving_up": "giving_up", "giving_up_language": "giving_up", "givingup": "giving_up",
	"user_frustration": "frustration", "userfrustration": "frustration", "frustration": "frustration",
	"premature_convergence": "lock_in", "prematureconvergence": "lock_in", "creative_block": "lock_in",
	"creativeblock": "lock_in", "assumption_lock": "lock_in", "assumptionlock": "lock_in", "low_novelty": "lock_in",
	"lownovelty":           "lock_in",
	"consecutive_failures": "failure", "bashfailure": "failure", "bash_failure": "failure", "log_error": "failure",
	"logerror": "failure", "failure": "failure",
	"surface_fix": "", "surfacefix": "", "passive_wait": "", "passivewait": "", "blame_environment": "",
	"blameenvironment": "", "tool_underuse": "", "nosearch": "", "no_search": "", "need_more_context": "",
	"sessionrestore": "", "session_restore": "",
}

// ErrUnknownTrigger is returned for a detected trigger id the engine does
// not know.
var ErrUnknownTrigger = errors.New("amp: unknown detected trigger")

// triggerDetection merges a host's detected_triggers into d; it reports
// whether a failure trigger was among them.
func triggerDetection(d *Detection, ids []string) (failure bool, err error) {
	for _, id := range ids {
		kind, ok := triggerIDs[strings.ToLower(strings.TrimSpace(id))]
		if !ok {
			return false, fmt.Errorf("%w: %q", ErrUnknownTrigger, id)
		}
		switch kind {
		case "giving_up":
			if d.GivingUp == "" {
				d.GivingUp = "detected_triggers: " + id
			}
		case "frustration":
			if d.Frustration == "" {
				d.Frustration = "detected_triggers: " + id
			}
		case "lock_in":
			if d.LockIn == "" {
				d.LockIn = "detected_triggers: " + id
			}
		case "failure":
			failure = true
		}
	}
	return failure, nil
}
