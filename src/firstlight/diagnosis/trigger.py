"""The prefilter: whether a line could carry a cause at all, before any signature is tried on it."""

from __future__ import annotations

import re

# A line that could carry a cause: a cheap test that spares the signatures most of a log's noise. Its words are
# searched in the lower-cased line (several times faster than a search that ignores case); the few that tell by their
# case (SSL, a glog severity, CANN) as written. Tests hold every branch of every signature to it.
_TRIGGER_WORDS = re.compile(
    r"error|exception|fail|unable|cannot|can't|couldn't|could not|"
    r"not (supported|valid|enough|compatible|available|found|a valid|recognized)|out of memory|no module|no such|"
    r"denied|refused|abort|killed|timed? ?out|unbalanced|insufficient|invalid|unknown|unsupported|undefined|"
    r"traceback|assert|requires?|must|exceed|too (old|large|small)|mismatch|incompatible|sigquit|dead|in use|bind|"
    r"nccl|only\s+support|capability|less than|greater than|divisible|trust_remote_code|remote code|errno|illegal|"
    r"what\(\)|does not|is not|didn't|no available|unrecognized|driver|larger than|smaller than|restricted|gated|"
    r"offline|magic|not available|watchdog|ordinal|symbol|no kernel|signal|sigill|maximum model length|"
    r"placement group|used by a process|wrong|only found|is supported by|cuda initialization|impossible|crashed|"
    r"mpisize|\borte\b|panicked|\[type=\w+, input_value=|real length|each process is one gpu|not healthy|\$\{|"
    r"multi-modal models|no valid|platform type|parameters section|argumentvalidation|are not set|visibility|"
    r"platform plugin|logical device|did not receive|no local weights|quantize is set|quantization was not|"
    r"deprecated and will|out of bounds|pre sm|no longer support|notenoughmemory|only 1 can be|not loaded|"
    r"notpresent|fatal|segmentation fault|core dumped|bus error|no gpu|appears to be a uri|create a symlink|"
    r"on an? `(err|none)` value|keyboardinterrupt|systemexit: \d|--no-jinja|has offset \d+, expected|"
    r"exit(ed)? (with )?(code|status)\s*:?\s*(-|0x|[1-9])|return ?code\s*[:=]?\s*-|"
    r"instead of \"success\"|kv cache memory: -| blocks: 0\b|"
    r"_err_|unavailable|cublas_status_|misaligned|access fault|dispatched on the cpu|exitcode|"
    r"unsatisfied condition|llama_max|no feasible|non-zero (exit )?status|protection domain|no matched device|"
    r"no hca|ibv_wc_|max seq len|num gpu blocks|has no attribute|compatible scheme|doesn.t support|"
    r"expected at most|conflicting static|upgrade|versionconflict|you need|should be|size changed|out of date|"
    r"no common block size|kernel blocks|no operator found|can only be used|backends are supported|wrapper::|"
    r"detected as host|not configured with|are bound to|duplicate gpu|num_max|% ?\w+\)? == \(?0|nvshmem|"
    r"gloo/transport|not been initialized|shmptropen|no space left|eaddrinuse|usage of each socket|"
    r"already allocated|supported in \w+ until|has been removed|no \w+ implementation|aren.t supported|"
    r"trust-remote-code|were not initialized|no file named|no supported|no config\.json|no \.?safetensors|"
    r"paths are empty|doesn.t have a|no model found|no (\w+ )?files? found|corrupted|doesn.t exist|has capacity|"
    r"too many open files|"
    r"missing tensor|metadata|headertoolarge|is lower than|needs to work with|was expected|already used by|"
    r"no enough|untagged enum|non-consecutive|missing vocab|install the|library version|no model architectures|"
    r"expecting compute|no binary for|no suitable image|connected via nvlink|pairwise nvlink|custom_all_reduce|"
    r"forward compatibility|pip install|partially initialized|no cpu backend|compiler found|not being installed|"
    r"make sure you have|no container manager|inference\.modelconfig|mpi size|world size \(|are not specified|"
    r"noexec|do not work with|path-like|missing field|not ready after|defaultmempool|only sm|capable device|"
    r"not compiled with|no npu|soc_version|fallen off the bus|libcudart|lacks|no \w+ gpus|eaddrnotavail|"
    r"connection reset|no [\w.]+ files found|instead of \"?\w*_success|are not installed|unrecognised|"
    r"do not exist|outdated|kind: notfound|please update|tensor_parallel_size|that was not possible|"
    r"\bno (compatible |supported |usable |available |suitable |visible )?(\w+ )?(gpus?|devices?|accelerators?) |"
    r"gguf_init_from_|connection closed|no backend type|'ninja', '-v'|service not known|not recognised|"
    r"\bonly\b[^.]{0,40}\bsupport|"
    r"please install|(is|are) missing|not implemented|\bout of (\w+ ){0,2}(memory|vram|ram)\b|"
    r"\bor (less|lower|older|earlier|greater|higher|newer|later)\b|"
    r"\b(not|isn.t|aren.t) (yet )?(supported|recogni[sz]ed|implemented)\b|"
    r"no plugins available|and above|headdim is different|currently supported|get_vocab method|without gpu support|"
    r"not installed|expected tpu devices|compression config of type|parameters not in model|missing \d+ parameters|"
    r"no gfx arch|unset |generated 0 |expected scalar type|too many blocks|(weight|shard) files?\b|"
    r"enclosed in double quotes|unexpected keyword|interface found|read-only file system|quota exceeded"
)
_TRIGGER_CASED = re.compile(r"SSL|\b[EF]\d{4} \d\d:\d\d|\bCANN\b")


class _Trigger:
    def search(self, line: str) -> re.Match[str] | None:
        return _TRIGGER_WORDS.search(line.lower()) or _TRIGGER_CASED.search(line)


TRIGGER = _Trigger()
