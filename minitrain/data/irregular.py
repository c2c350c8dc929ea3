"""The irregular model verbs: only what differs from the regular machinery in `conjugator.py`.

Most irregular verbs are regular almost everywhere. Their irregularities fall into a few slots:

    yo_stem         present yo and the whole present subjunctive: teng-o, teng-a, teng-amos
    subj_stem       the present subjunctive only: sep-a (saber)
    preterite_stem  a "strong" preterite with unstressed endings -e -iste -o -imos -isteis -ieron
                    (-eron after j): tuv-e, tuv-o; dij-e, dij-eron
    future_stem     future and conditional: tendr-é, tendr-ía
    pattern         the stem change the other forms follow (tener: e-ie, tienes)
    tenses          whole tenses written out, six forms separated by spaces (ser, ir, dar, ver, ...)
    cells           single forms written out, e.g. {"R3": "hizo"}

A verb built on a model by a prefix (mantener = man + tener, deshacer = des + hacer) is conjugated like the
model with the prefix in front; the verb list names the model verb as the verb's class.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Irregular:
    pattern: str = "regular"
    yo_stem: str | None = None
    subj_stem: str | None = None
    preterite_stem: str | None = None
    future_stem: str | None = None
    tenses: dict[str, str] = field(default_factory=dict)
    cells: dict[str, str] = field(default_factory=dict)


_SER_IR_PRETERITE = "fui fuiste fue fuimos fuisteis fueron"

IRREGULAR: dict[str, Irregular] = {
    "ser": Irregular(
        tenses={
            "P": "soy eres es somos sois son",
            "R": _SER_IR_PRETERITE,
            "I": "era eras era éramos erais eran",
            "S": "sea seas sea seamos seáis sean",
        }
    ),
    "ir": Irregular(
        tenses={
            "P": "voy vas va vamos vais van",
            "R": _SER_IR_PRETERITE,
            "I": "iba ibas iba íbamos ibais iban",
            "S": "vaya vayas vaya vayamos vayáis vayan",
        }
    ),
    "estar": Irregular(
        preterite_stem="estuv",
        tenses={
            "P": "estoy estás está estamos estáis están",
            "S": "esté estés esté estemos estéis estén",
        },
    ),
    "haber": Irregular(
        preterite_stem="hub",
        future_stem="habr",
        tenses={
            "P": "he has ha hemos habéis han",
            "S": "haya hayas haya hayamos hayáis hayan",
        },
    ),
    "dar": Irregular(
        tenses={
            "P": "doy das da damos dais dan",
            "R": "di diste dio dimos disteis dieron",
            "S": "dé des dé demos deis den",
        }
    ),
    "ver": Irregular(
        tenses={
            "P": "veo ves ve vemos veis ven",
            "R": "vi viste vio vimos visteis vieron",
            "I": "veía veías veía veíamos veíais veían",
            "S": "vea veas vea veamos veáis vean",
        }
    ),
    "saber": Irregular(subj_stem="sep", preterite_stem="sup", future_stem="sabr", cells={"P1": "sé"}),
    "caber": Irregular(yo_stem="quep", preterite_stem="cup", future_stem="cabr"),
    "tener": Irregular(pattern="e-ie", yo_stem="teng", preterite_stem="tuv", future_stem="tendr"),
    "venir": Irregular(pattern="e-ie", yo_stem="veng", preterite_stem="vin", future_stem="vendr"),
    "poner": Irregular(yo_stem="pong", preterite_stem="pus", future_stem="pondr"),
    "hacer": Irregular(yo_stem="hag", preterite_stem="hic", future_stem="har", cells={"R3": "hizo"}),
    "decir": Irregular(pattern="e-i", yo_stem="dig", preterite_stem="dij", future_stem="dir"),
    "poder": Irregular(pattern="o-ue", preterite_stem="pud", future_stem="podr"),
    "querer": Irregular(pattern="e-ie", preterite_stem="quis", future_stem="querr"),
    "salir": Irregular(yo_stem="salg", future_stem="saldr"),
    "valer": Irregular(yo_stem="valg", future_stem="valdr"),
    "traer": Irregular(yo_stem="traig", preterite_stem="traj"),
    "caer": Irregular(yo_stem="caig"),
    "andar": Irregular(preterite_stem="anduv"),
    "oír": Irregular(yo_stem="oig", tenses={"P": "oigo oyes oye oímos oís oyen"}),
    "oler": Irregular(
        tenses={
            "P": "huelo hueles huele olemos oléis huelen",
            "S": "huela huelas huela olamos oláis huelan",
        }
    ),
    # reír and freír: rio, frio, riais, friais are monosyllables by the RAE's 2010 rules, so no accent;
    # sonrió and sonriáis have two syllables and keep it.
    "reír": Irregular(
        tenses={
            "P": "río ríes ríe reímos reís ríen",
            "R": "reí reíste rio reímos reísteis rieron",
            "S": "ría rías ría riamos riais rían",
        }
    ),
    "freír": Irregular(
        tenses={
            "P": "frío fríes fríe freímos freís fríen",
            "R": "freí freíste frio freímos freísteis frieron",
            "S": "fría frías fría friamos friais frían",
        }
    ),
    "sonreír": Irregular(
        tenses={
            "P": "sonrío sonríes sonríe sonreímos sonreís sonríen",
            "R": "sonreí sonreíste sonrió sonreímos sonreísteis sonrieron",
            "S": "sonría sonrías sonría sonriamos sonriáis sonrían",
        }
    ),
}
