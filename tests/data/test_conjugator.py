"""The conjugator against hand-written tables: regular verbs, spelling changes, stem changes.

Each table was written out by hand from Spanish grammar (current RAE orthography), not generated. The class
each verb is conjugated with comes from data/raw/verbs.tsv, so the tables check the verb list as well.
Irregular verbs are in tests/data/test_data_irregular.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minitrain.data.conjugator import conjugate
from minitrain.data.verbs import load_verbs

VERBS_TSV = Path(__file__).resolve().parents[2] / "data" / "raw" / "verbs.tsv"
CLASS_OF = {v.infinitive: v.verb_class for v in load_verbs(VERBS_TSV)}

TABLES = {
    # --- the held-out val verbs: these are what lab 01 scores
    "caminar": """
        P camino caminas camina caminamos camináis caminan
        R caminé caminaste caminó caminamos caminasteis caminaron
        I caminaba caminabas caminaba caminábamos caminabais caminaban
        F caminaré caminarás caminará caminaremos caminaréis caminarán
        C caminaría caminarías caminaría caminaríamos caminaríais caminarían
        S camine camines camine caminemos caminéis caminen""",
    "vender": """
        P vendo vendes vende vendemos vendéis venden
        R vendí vendiste vendió vendimos vendisteis vendieron
        I vendía vendías vendía vendíamos vendíais vendían
        F venderé venderás venderá venderemos venderéis venderán
        C vendería venderías vendería venderíamos venderíais venderían
        S venda vendas venda vendamos vendáis vendan""",
    "dividir": """
        P divido divides divide dividimos dividís dividen
        R dividí dividiste dividió dividimos dividisteis dividieron
        I dividía dividías dividía dividíamos dividíais dividían
        F dividiré dividirás dividirá dividiremos dividiréis dividirán
        C dividiría dividirías dividiría dividiríamos dividiríais dividirían
        S divida dividas divida dividamos dividáis dividan""",
    "cerrar": """
        P cierro cierras cierra cerramos cerráis cierran
        R cerré cerraste cerró cerramos cerrasteis cerraron
        I cerraba cerrabas cerraba cerrábamos cerrabais cerraban
        F cerraré cerrarás cerrará cerraremos cerraréis cerrarán
        C cerraría cerrarías cerraría cerraríamos cerraríais cerrarían
        S cierre cierres cierre cerremos cerréis cierren""",
    # --- regular, with spelling changes
    "hablar": """
        P hablo hablas habla hablamos habláis hablan
        R hablé hablaste habló hablamos hablasteis hablaron
        I hablaba hablabas hablaba hablábamos hablabais hablaban
        F hablaré hablarás hablará hablaremos hablaréis hablarán
        C hablaría hablarías hablaría hablaríamos hablaríais hablarían
        S hable hables hable hablemos habléis hablen""",
    "comer": """
        P como comes come comemos coméis comen
        R comí comiste comió comimos comisteis comieron
        I comía comías comía comíamos comíais comían
        F comeré comerás comerá comeremos comeréis comerán
        C comería comerías comería comeríamos comeríais comerían
        S coma comas coma comamos comáis coman""",
    "vivir": """
        P vivo vives vive vivimos vivís viven
        R viví viviste vivió vivimos vivisteis vivieron
        I vivía vivías vivía vivíamos vivíais vivían
        F viviré vivirás vivirá viviremos viviréis vivirán
        C viviría vivirías viviría viviríamos viviríais vivirían
        S viva vivas viva vivamos viváis vivan""",
    "buscar": """
        P busco buscas busca buscamos buscáis buscan
        R busqué buscaste buscó buscamos buscasteis buscaron
        I buscaba buscabas buscaba buscábamos buscabais buscaban
        F buscaré buscarás buscará buscaremos buscaréis buscarán
        C buscaría buscarías buscaría buscaríamos buscaríais buscarían
        S busque busques busque busquemos busquéis busquen""",
    "pagar": """
        P pago pagas paga pagamos pagáis pagan
        R pagué pagaste pagó pagamos pagasteis pagaron
        I pagaba pagabas pagaba pagábamos pagabais pagaban
        F pagaré pagarás pagará pagaremos pagaréis pagarán
        C pagaría pagarías pagaría pagaríamos pagaríais pagarían
        S pague pagues pague paguemos paguéis paguen""",
    "cruzar": """
        P cruzo cruzas cruza cruzamos cruzáis cruzan
        R crucé cruzaste cruzó cruzamos cruzasteis cruzaron
        I cruzaba cruzabas cruzaba cruzábamos cruzabais cruzaban
        F cruzaré cruzarás cruzará cruzaremos cruzaréis cruzarán
        C cruzaría cruzarías cruzaría cruzaríamos cruzaríais cruzarían
        S cruce cruces cruce crucemos crucéis crucen""",
    "averiguar": """
        P averiguo averiguas averigua averiguamos averiguáis averiguan
        R averigüé averiguaste averiguó averiguamos averiguasteis averiguaron
        I averiguaba averiguabas averiguaba averiguábamos averiguabais averiguaban
        F averiguaré averiguarás averiguará averiguaremos averiguaréis averiguarán
        C averiguaría averiguarías averiguaría averiguaríamos averiguaríais averiguarían
        S averigüe averigües averigüe averigüemos averigüéis averigüen""",
    "coger": """
        P cojo coges coge cogemos cogéis cogen
        R cogí cogiste cogió cogimos cogisteis cogieron
        I cogía cogías cogía cogíamos cogíais cogían
        F cogeré cogerás cogerá cogeremos cogeréis cogerán
        C cogería cogerías cogería cogeríamos cogeríais cogerían
        S coja cojas coja cojamos cojáis cojan""",
    "vencer": """
        P venzo vences vence vencemos vencéis vencen
        R vencí venciste venció vencimos vencisteis vencieron
        I vencía vencías vencía vencíamos vencíais vencían
        F venceré vencerás vencerá venceremos venceréis vencerán
        C vencería vencerías vencería venceríamos venceríais vencerían
        S venza venzas venza venzamos venzáis venzan""",
    "dirigir": """
        P dirijo diriges dirige dirigimos dirigís dirigen
        R dirigí dirigiste dirigió dirigimos dirigisteis dirigieron
        I dirigía dirigías dirigía dirigíamos dirigíais dirigían
        F dirigiré dirigirás dirigirá dirigiremos dirigiréis dirigirán
        C dirigiría dirigirías dirigiría dirigiríamos dirigiríais dirigirían
        S dirija dirijas dirija dirijamos dirijáis dirijan""",
    "distinguir": """
        P distingo distingues distingue distinguimos distinguís distinguen
        R distinguí distinguiste distinguió distinguimos distinguisteis distinguieron
        I distinguía distinguías distinguía distinguíamos distinguíais distinguían
        F distinguiré distinguirás distinguirá distinguiremos distinguiréis distinguirán
        C distinguiría distinguirías distinguiría distinguiríamos distinguiríais distinguirían
        S distinga distingas distinga distingamos distingáis distingan""",
    "delinquir": """
        P delinco delinques delinque delinquimos delinquís delinquen
        R delinquí delinquiste delinquió delinquimos delinquisteis delinquieron
        I delinquía delinquías delinquía delinquíamos delinquíais delinquían
        F delinquiré delinquirás delinquirá delinquiremos delinquiréis delinquirán
        C delinquiría delinquirías delinquiría delinquiríamos delinquiríais delinquirían
        S delinca delincas delinca delincamos delincáis delincan""",
    "leer": """
        P leo lees lee leemos leéis leen
        R leí leíste leyó leímos leísteis leyeron
        I leía leías leía leíamos leíais leían
        F leeré leerás leerá leeremos leeréis leerán
        C leería leerías leería leeríamos leeríais leerían
        S lea leas lea leamos leáis lean""",
    "gruñir": """
        P gruño gruñes gruñe gruñimos gruñís gruñen
        R gruñí gruñiste gruñó gruñimos gruñisteis gruñeron
        I gruñía gruñías gruñía gruñíamos gruñíais gruñían
        F gruñiré gruñirás gruñirá gruñiremos gruñiréis gruñirán
        C gruñiría gruñirías gruñiría gruñiríamos gruñiríais gruñirían
        S gruña gruñas gruña gruñamos gruñáis gruñan""",
    "zambullir": """
        P zambullo zambulles zambulle zambullimos zambullís zambullen
        R zambullí zambulliste zambulló zambullimos zambullisteis zambulleron
        I zambullía zambullías zambullía zambullíamos zambullíais zambullían
        F zambulliré zambullirás zambullirá zambulliremos zambulliréis zambullirán
        C zambulliría zambullirías zambulliría zambulliríamos zambulliríais zambullirían
        S zambulla zambullas zambulla zambullamos zambulláis zambullan""",
    # --- stem changes
    "empezar": """
        P empiezo empiezas empieza empezamos empezáis empiezan
        R empecé empezaste empezó empezamos empezasteis empezaron
        I empezaba empezabas empezaba empezábamos empezabais empezaban
        F empezaré empezarás empezará empezaremos empezaréis empezarán
        C empezaría empezarías empezaría empezaríamos empezaríais empezarían
        S empiece empieces empiece empecemos empecéis empiecen""",
    "negar": """
        P niego niegas niega negamos negáis niegan
        R negué negaste negó negamos negasteis negaron
        I negaba negabas negaba negábamos negabais negaban
        F negaré negarás negará negaremos negaréis negarán
        C negaría negarías negaría negaríamos negaríais negarían
        S niegue niegues niegue neguemos neguéis nieguen""",
    "entender": """
        P entiendo entiendes entiende entendemos entendéis entienden
        R entendí entendiste entendió entendimos entendisteis entendieron
        I entendía entendías entendía entendíamos entendíais entendían
        F entenderé entenderás entenderá entenderemos entenderéis entenderán
        C entendería entenderías entendería entenderíamos entenderíais entenderían
        S entienda entiendas entienda entendamos entendáis entiendan""",
    "sentir": """
        P siento sientes siente sentimos sentís sienten
        R sentí sentiste sintió sentimos sentisteis sintieron
        I sentía sentías sentía sentíamos sentíais sentían
        F sentiré sentirás sentirá sentiremos sentiréis sentirán
        C sentiría sentirías sentiría sentiríamos sentiríais sentirían
        S sienta sientas sienta sintamos sintáis sientan""",
    "preferir": """
        P prefiero prefieres prefiere preferimos preferís prefieren
        R preferí preferiste prefirió preferimos preferisteis prefirieron
        I prefería preferías prefería preferíamos preferíais preferían
        F preferiré preferirás preferirá preferiremos preferiréis preferirán
        C preferiría preferirías preferiría preferiríamos preferiríais preferirían
        S prefiera prefieras prefiera prefiramos prefiráis prefieran""",
    "contar": """
        P cuento cuentas cuenta contamos contáis cuentan
        R conté contaste contó contamos contasteis contaron
        I contaba contabas contaba contábamos contabais contaban
        F contaré contarás contará contaremos contaréis contarán
        C contaría contarías contaría contaríamos contaríais contarían
        S cuente cuentes cuente contemos contéis cuenten""",
    "almorzar": """
        P almuerzo almuerzas almuerza almorzamos almorzáis almuerzan
        R almorcé almorzaste almorzó almorzamos almorzasteis almorzaron
        I almorzaba almorzabas almorzaba almorzábamos almorzabais almorzaban
        F almorzaré almorzarás almorzará almorzaremos almorzaréis almorzarán
        C almorzaría almorzarías almorzaría almorzaríamos almorzaríais almorzarían
        S almuerce almuerces almuerce almorcemos almorcéis almuercen""",
    "colgar": """
        P cuelgo cuelgas cuelga colgamos colgáis cuelgan
        R colgué colgaste colgó colgamos colgasteis colgaron
        I colgaba colgabas colgaba colgábamos colgabais colgaban
        F colgaré colgarás colgará colgaremos colgaréis colgarán
        C colgaría colgarías colgaría colgaríamos colgaríais colgarían
        S cuelgue cuelgues cuelgue colguemos colguéis cuelguen""",
    "volver": """
        P vuelvo vuelves vuelve volvemos volvéis vuelven
        R volví volviste volvió volvimos volvisteis volvieron
        I volvía volvías volvía volvíamos volvíais volvían
        F volveré volverás volverá volveremos volveréis volverán
        C volvería volverías volvería volveríamos volveríais volverían
        S vuelva vuelvas vuelva volvamos volváis vuelvan""",
    "torcer": """
        P tuerzo tuerces tuerce torcemos torcéis tuercen
        R torcí torciste torció torcimos torcisteis torcieron
        I torcía torcías torcía torcíamos torcíais torcían
        F torceré torcerás torcerá torceremos torceréis torcerán
        C torcería torcerías torcería torceríamos torceríais torcerían
        S tuerza tuerzas tuerza torzamos torzáis tuerzan""",
    "dormir": """
        P duermo duermes duerme dormimos dormís duermen
        R dormí dormiste durmió dormimos dormisteis durmieron
        I dormía dormías dormía dormíamos dormíais dormían
        F dormiré dormirás dormirá dormiremos dormiréis dormirán
        C dormiría dormirías dormiría dormiríamos dormiríais dormirían
        S duerma duermas duerma durmamos durmáis duerman""",
    "morir": """
        P muero mueres muere morimos morís mueren
        R morí moriste murió morimos moristeis murieron
        I moría morías moría moríamos moríais morían
        F moriré morirás morirá moriremos moriréis morirán
        C moriría morirías moriría moriríamos moriríais morirían
        S muera mueras muera muramos muráis mueran""",
    "pedir": """
        P pido pides pide pedimos pedís piden
        R pedí pediste pidió pedimos pedisteis pidieron
        I pedía pedías pedía pedíamos pedíais pedían
        F pediré pedirás pedirá pediremos pediréis pedirán
        C pediría pedirías pediría pediríamos pediríais pedirían
        S pida pidas pida pidamos pidáis pidan""",
    "seguir": """
        P sigo sigues sigue seguimos seguís siguen
        R seguí seguiste siguió seguimos seguisteis siguieron
        I seguía seguías seguía seguíamos seguíais seguían
        F seguiré seguirás seguirá seguiremos seguiréis seguirán
        C seguiría seguirías seguiría seguiríamos seguiríais seguirían
        S siga sigas siga sigamos sigáis sigan""",
    "elegir": """
        P elijo eliges elige elegimos elegís eligen
        R elegí elegiste eligió elegimos elegisteis eligieron
        I elegía elegías elegía elegíamos elegíais elegían
        F elegiré elegirás elegirá elegiremos elegiréis elegirán
        C elegiría elegirías elegiría elegiríamos elegiríais elegirían
        S elija elijas elija elijamos elijáis elijan""",
    "reñir": """
        P riño riñes riñe reñimos reñís riñen
        R reñí reñiste riñó reñimos reñisteis riñeron
        I reñía reñías reñía reñíamos reñíais reñían
        F reñiré reñirás reñirá reñiremos reñiréis reñirán
        C reñiría reñirías reñiría reñiríamos reñiríais reñirían
        S riña riñas riña riñamos riñáis riñan""",
    "jugar": """
        P juego juegas juega jugamos jugáis juegan
        R jugué jugaste jugó jugamos jugasteis jugaron
        I jugaba jugabas jugaba jugábamos jugabais jugaban
        F jugaré jugarás jugará jugaremos jugaréis jugarán
        C jugaría jugarías jugaría jugaríamos jugaríais jugarían
        S juegue juegues juegue juguemos juguéis jueguen""",
    "adquirir": """
        P adquiero adquieres adquiere adquirimos adquirís adquieren
        R adquirí adquiriste adquirió adquirimos adquiristeis adquirieron
        I adquiría adquirías adquiría adquiríamos adquiríais adquirían
        F adquiriré adquirirás adquirirá adquiriremos adquiriréis adquirirán
        C adquiriría adquirirías adquiriría adquiriríamos adquiriríais adquirirían
        S adquiera adquieras adquiera adquiramos adquiráis adquieran""",
    "enviar": """
        P envío envías envía enviamos enviáis envían
        R envié enviaste envió enviamos enviasteis enviaron
        I enviaba enviabas enviaba enviábamos enviabais enviaban
        F enviaré enviarás enviará enviaremos enviaréis enviarán
        C enviaría enviarías enviaría enviaríamos enviaríais enviarían
        S envíe envíes envíe enviemos enviéis envíen""",
    "continuar": """
        P continúo continúas continúa continuamos continuáis continúan
        R continué continuaste continuó continuamos continuasteis continuaron
        I continuaba continuabas continuaba continuábamos continuabais continuaban
        F continuaré continuarás continuará continuaremos continuaréis continuarán
        C continuaría continuarías continuaría continuaríamos continuaríais continuarían
        S continúe continúes continúe continuemos continuéis continúen""",
    "reunir": """
        P reúno reúnes reúne reunimos reunís reúnen
        R reuní reuniste reunió reunimos reunisteis reunieron
        I reunía reunías reunía reuníamos reuníais reunían
        F reuniré reunirás reunirá reuniremos reuniréis reunirán
        C reuniría reunirías reuniría reuniríamos reuniríais reunirían
        S reúna reúnas reúna reunamos reunáis reúnan""",
    "prohibir": """
        P prohíbo prohíbes prohíbe prohibimos prohibís prohíben
        R prohibí prohibiste prohibió prohibimos prohibisteis prohibieron
        I prohibía prohibías prohibía prohibíamos prohibíais prohibían
        F prohibiré prohibirás prohibirá prohibiremos prohibiréis prohibirán
        C prohibiría prohibirías prohibiría prohibiríamos prohibiríais prohibirían
        S prohíba prohíbas prohíba prohibamos prohibáis prohíban""",
    # --- zc, uir, ducir
    "conocer": """
        P conozco conoces conoce conocemos conocéis conocen
        R conocí conociste conoció conocimos conocisteis conocieron
        I conocía conocías conocía conocíamos conocíais conocían
        F conoceré conocerás conocerá conoceremos conoceréis conocerán
        C conocería conocerías conocería conoceríamos conoceríais conocerían
        S conozca conozcas conozca conozcamos conozcáis conozcan""",
    "lucir": """
        P luzco luces luce lucimos lucís lucen
        R lucí luciste lució lucimos lucisteis lucieron
        I lucía lucías lucía lucíamos lucíais lucían
        F luciré lucirás lucirá luciremos luciréis lucirán
        C luciría lucirías luciría luciríamos luciríais lucirían
        S luzca luzcas luzca luzcamos luzcáis luzcan""",
    "construir": """
        P construyo construyes construye construimos construís construyen
        R construí construiste construyó construimos construisteis construyeron
        I construía construías construía construíamos construíais construían
        F construiré construirás construirá construiremos construiréis construirán
        C construiría construirías construiría construiríamos construiríais construirían
        S construya construyas construya construyamos construyáis construyan""",
    "conducir": """
        P conduzco conduces conduce conducimos conducís conducen
        R conduje condujiste condujo condujimos condujisteis condujeron
        I conducía conducías conducía conducíamos conducíais conducían
        F conduciré conducirás conducirá conduciremos conduciréis conducirán
        C conduciría conducirías conduciría conduciríamos conduciríais conducirían
        S conduzca conduzcas conduzca conduzcamos conduzcáis conduzcan""",
}


def parse_table(table: str) -> dict[tuple[str, int], str]:
    """'P camino caminas ...' lines -> {("P", 1): "camino", ...}."""
    forms = {}
    for line in table.strip().splitlines():
        tense, *six = line.split()
        assert len(six) == 6, line
        forms.update({(tense, person): form for person, form in enumerate(six, start=1)})
    assert len(forms) == 36
    return forms


def check_against_table(infinitive: str, table: str) -> None:
    expected = parse_table(table)
    got = conjugate(infinitive, CLASS_OF[infinitive])
    wrong = {f"{t}{p}": (got[t, p], form) for (t, p), form in expected.items() if got[t, p] != form}
    assert not wrong, f"{infinitive} ({CLASS_OF[infinitive]}): got/expected {wrong}"


@pytest.mark.lab00
@pytest.mark.parametrize("infinitive", sorted(TABLES))
def test_regular_and_stem_changing_verbs_match_hand_written_tables(infinitive):
    check_against_table(infinitive, TABLES[infinitive])


def test_unknown_class_and_wrong_model_are_errors():
    with pytest.raises(ValueError, match="unknown verb class"):
        conjugate("hablar", "e-ue")
    with pytest.raises(ValueError, match="does not end in it"):
        conjugate("hablar", "tener")
    with pytest.raises(ValueError, match="not an infinitive"):
        conjugate("hablo", "regular")
